/* Speed of libharmonia, run with and without LD_PRELOAD by scripts/bench-bbio.sh.
 *
 *   bbio_bench passthrough CALLS          ns per write(2) of 1 byte to /dev/null (not staged)
 *   bbio_bench memcpy MIB                 GB/s of memcpy of 1 MiB blocks into fresh memory
 *   bbio_bench stage FILE MIB             GB/s of 1 MiB write(2) calls (staged when preloaded),
 *                                         then GB/s of close+fsync (the flush) as a second line
 *   bbio_bench pwritev FILE MIB           GB/s of what that flush does, without the library: MIB
 *                                         1 MiB blocks already in memory written with pwritev(2)
 *                                         runs of 64 blocks, then fsync+close
 *   bbio_bench pwrite FILE CALLS BYTES    ns per pwrite(2) of BYTES at consecutive offsets of a
 *                                         regular file (the close, and a flush, not timed)
 *   bbio_bench opens DIR HELD FILES       with HELD more descriptors open (of /dev/null), us per
 *                                         open+write+close of FILES files DIR/fK that the open
 *                                         creates, then us per the same of the existing files */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const size_t mib = 1 << 20;
  if (!strcmp(argv[1], "passthrough")) {
    const long calls = atol(argv[2]);
    const int fd = open("/dev/null", O_WRONLY);
    char byte = 'x';
    const double start = now();
    for (long i = 0; i < calls; ++i)
      if (write(fd, &byte, 1) != 1) return 1;
    printf("%.2f\n", (now() - start) / (double)calls * 1e9);
  } else if (!strcmp(argv[1], "memcpy")) {
    const long count = atol(argv[2]);
    char* src = malloc(mib);
    memset(src, 7, mib);
    char** blocks = malloc(sizeof(char*) * (size_t)count);
    for (long i = 0; i < count; ++i) blocks[i] = malloc(mib);
    const double start = now();
    for (long i = 0; i < count; ++i) memcpy(blocks[i], src, mib);
    const double seconds = now() - start;
    printf("%.3f\n", (double)count * (double)mib / seconds / 1e9);
  } else if (!strcmp(argv[1], "stage") && argc == 4) {
    const long count = atol(argv[3]);
    char* src = malloc(mib);
    memset(src, 7, mib);
    const int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    double start = now();
    for (long i = 0; i < count; ++i)
      if (write(fd, src, mib) != (ssize_t)mib) return 1;
    const double staged = now() - start;
    start = now();
    if (fsync(fd) != 0 || close(fd) != 0) return 1;
    const double flushed = now() - start;
    printf("%.3f\n%.3f\n", (double)count * (double)mib / staged / 1e9,
           (double)count * (double)mib / flushed / 1e9);
  } else if (!strcmp(argv[1], "pwritev") && argc == 4) {
    const long count = atol(argv[3]);
    if (count <= 0) return 2;
    enum { kRun = 64 };  // blocks per pwritev: the library's flush runs of up to 64 MiB
    struct iovec* blocks = malloc(sizeof(struct iovec) * (size_t)count);
    for (long i = 0; i < count; ++i) {
      blocks[i].iov_base = malloc(mib);
      blocks[i].iov_len = mib;
      memset(blocks[i].iov_base, 7, mib);
    }
    const int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    const double start = now();
    for (long i = 0; i < count; i += kRun) {
      const int run = (int)(count - i < kRun ? count - i : kRun);
      if (pwritev(fd, blocks + i, run, (off_t)i * (off_t)mib) != (ssize_t)((size_t)run * mib))
        return 1;
    }
    if (fsync(fd) != 0 || close(fd) != 0) return 1;
    printf("%.3f\n", (double)count * (double)mib / (now() - start) / 1e9);
  } else if (!strcmp(argv[1], "pwrite") && argc == 5) {
    const long calls = atol(argv[3]);
    const size_t bytes = (size_t)atol(argv[4]);
    if (calls <= 0 || bytes == 0) return 2;
    char* src = malloc(bytes);
    memset(src, 7, bytes);
    const int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    const double start = now();
    for (long i = 0; i < calls; ++i)
      if (pwrite(fd, src, bytes, (off_t)i * (off_t)bytes) != (ssize_t)bytes) return 1;
    const double seconds = now() - start;
    if (close(fd) != 0) return 1;
    printf("%.1f\n", seconds / (double)calls * 1e9);
  } else if (!strcmp(argv[1], "opens") && argc == 5) {
    const long held = atol(argv[3]), files = atol(argv[4]);
    if (held < 0 || files <= 0) return 2;
    for (long i = 0; i < held; ++i)
      if (open("/dev/null", O_RDONLY) < 0) return 1;
    const char block[4096] = {7};
    for (int pass = 0; pass < 2; ++pass) {  // first creating the files, then opening them again
      const double start = now();
      for (long i = 0; i < files; ++i) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/f%ld", argv[2], i);
        const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, block, sizeof(block)) != (ssize_t)sizeof(block) || close(fd) != 0)
          return 1;
      }
      printf("%.1f\n", (now() - start) / (double)files * 1e6);
    }
  } else {
    return 2;
  }
  return 0;
}
