/* File-per-process MPI writer, as IOR and HACC-IO (lseek + write) or MPI-IO and HDF5 (pwrite)
 * write: mpi_writer DIR MODE COUNT SIZE, MODE "seek" or "pwrite". Each rank writes COUNT requests
 * of SIZE bytes to DIR/rank-<r>.bin, request k holding the byte (r + k) % 251 at every position,
 * in reverse order for pwrite (so offsets matter). */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 5) {
    if (rank == 0) fprintf(stderr, "usage: mpi_writer DIR seek|pwrite COUNT SIZE\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int use_pwrite = strcmp(argv[2], "pwrite") == 0;
  const long count = atol(argv[3]);
  const size_t size = (size_t)atol(argv[4]);
  char path[4096];
  snprintf(path, sizeof(path), "%s/rank-%d.bin", argv[1], rank);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char* buf = malloc(size);
  int failed = fd < 0;
  for (long k = 0; k < count && !failed; ++k) {
    const long request = use_pwrite ? count - 1 - k : k;
    memset(buf, (int)((rank + request) % 251), size);
    if (use_pwrite) {
      failed = pwrite(fd, buf, size, (off_t)(request * (long)size)) != (ssize_t)size;
    } else {
      failed = lseek(fd, (off_t)(request * (long)size), SEEK_SET) < 0 ||
               write(fd, buf, size) != (ssize_t)size;
    }
  }
  failed |= close(fd) != 0;
  free(buf);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
