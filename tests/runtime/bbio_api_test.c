/* The BBIO C API of a program linked with libharmonia (no LD_PRELOAD): enable, flush, the flush
 * callback, disable, init with a stage directory, finalize, phase markers and their trace.
 * Usage: bbio_api_test WORKDIR. Exits non-zero with a message on the first failed check. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <harmonia/bbio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static int callback_calls;
static int callback_fd = -1;
static void on_flush(int fd) {
  ++callback_calls;
  callback_fd = fd;
}

/* The size on disk: a raw system call (stat itself shows the size the program wrote). */
static long size_of(const char* path) {
  struct stat st;
  return syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0 ? (long)st.st_size : -1;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  char path[4096], stage[4096], trace[4096];
  snprintf(path, sizeof path, "%s/api.bin", argv[1]);
  snprintf(stage, sizeof stage, "%s/stage", argv[1]);
  snprintf(trace, sizeof trace, "%s/phases.jsonl", argv[1]);
  mkdir(stage, 0755);
  setenv("HARMONIA_PHASE_TRACE", trace, 1);

  /* Errors are errno-style. */
  CHECK(BBIO_Init("relative/dir", 0) == -1 && errno == EINVAL);
  CHECK(BBIO_Flush(12345) == -1 && errno == EBADF);
  CHECK(BBIO_On_flush(12345, on_flush) == -1 && errno == EBADF);
  CHECK(harmonia_io_end() == -1 && errno == EINVAL);

  CHECK(BBIO_Init(stage, 1 << 20) == 0);
  CHECK(harmonia_io_begin("checkpoint", 3000) == 0);
  CHECK(harmonia_io_begin("nested", 0) == -1 && errno == EALREADY);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  CHECK(BBIO_Enable(fd) == 0); /* already staged by path: still fine */
  CHECK(BBIO_On_flush(fd, on_flush) == 0);
  char data[1000];
  memset(data, 'h', sizeof data);
  CHECK(write(fd, data, sizeof data) == (ssize_t)sizeof data);
  CHECK(size_of(path) == 0);
  CHECK(BBIO_Flush(fd) == 0);
  CHECK(size_of(path) == 1000);
  CHECK(callback_calls == 1 && callback_fd >= 0);
  CHECK(BBIO_Flush(fd) == 0); /* empty: no callback */
  CHECK(callback_calls == 1);
  CHECK(write(fd, data, sizeof data) == (ssize_t)sizeof data);
  CHECK(BBIO_Disable(fd) == 0); /* flushes, then writes go straight through */
  CHECK(size_of(path) == 2000 && callback_calls == 2);
  CHECK(write(fd, data, sizeof data) == (ssize_t)sizeof data);
  CHECK(size_of(path) == 3000);
  CHECK(BBIO_On_flush(fd, on_flush) == -1 && errno == EINVAL); /* not staged any more */
  CHECK(BBIO_Enable(fd) == 0);
  CHECK(write(fd, data, 10) == 10);
  CHECK(size_of(path) == 3000);
  CHECK(BBIO_Finalize() == 0);
  CHECK(size_of(path) == 3010);
  CHECK(close(fd) == 0);
  CHECK(harmonia_io_end() == 0);

  char line[512];
  FILE* f = fopen(trace, "r");
  CHECK(f != NULL);
  int begins = 0, ends = 0;
  while (f && fgets(line, sizeof line, f)) {
    begins += strstr(line, "\"event\": \"begin\"") && strstr(line, "\"checkpoint\"") &&
              strstr(line, "\"expected_bytes\": 3000");
    ends += strstr(line, "\"event\": \"end\"") && strstr(line, "\"duration\"") != NULL;
  }
  if (f) fclose(f);
  CHECK(begins == 1 && ends == 1);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}
