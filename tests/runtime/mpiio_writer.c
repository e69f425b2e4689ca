/* An MPI-IO program for libharmonia's outside-program tests: every rank writes its blocks of a
 * shared file, interleaved with the other ranks' (block k of rank r at (k * size + r) * block),
 * with collective MPI_File_write_at_all, syncs, and then every rank reads the whole file back
 * with MPI_File_read_at and checks each byte. Prints "ok" on rank 0 and exits 0 when every rank
 * saw every byte right; exits 1 otherwise.
 *
 *   mpiio_writer PATH BLOCKS BLOCK_BYTES */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static char expected(long offset) { return (char)((offset * 7 + offset / 4093) % 251); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: mpiio_writer PATH BLOCKS BLOCK_BYTES\n");
    MPI_Finalize();
    return 2;
  }
  const long blocks = atol(argv[2]), block = atol(argv[3]);
  char* buf = malloc((size_t)block);
  MPI_File file;
  if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                    &file) != MPI_SUCCESS) {
    fprintf(stderr, "mpiio_writer: cannot open %s\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (long k = 0; k < blocks; ++k) {
    const long at = (k * size + rank) * block;
    for (long i = 0; i < block; ++i) buf[i] = expected(at + i);
    MPI_File_write_at_all(file, at, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
  }
  MPI_File_sync(file);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_sync(file);
  long wrong = 0;
  for (long k = 0; k < blocks * size; ++k) {
    MPI_Status status;
    int got = 0;
    MPI_File_read_at(file, k * block, buf, (int)block, MPI_BYTE, &status);
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != block) {
      ++wrong;
      continue;
    }
    for (long i = 0; i < block; ++i) wrong += buf[i] != expected(k * block + i);
  }
  MPI_File_close(&file);
  long all_wrong = 0;
  MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all_wrong)
      printf("%ld wrong bytes or short blocks\n", all_wrong);
    else
      printf("ok\n");
  }
  free(buf);
  MPI_Finalize();
  return all_wrong ? 1 : 0;
}
