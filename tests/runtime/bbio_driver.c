/* Test driver for libharmonia: performs one libc call per command on one file and prints a JSON
 * line per command ({"op", "ret", "errno", ...}), so that a run with and without the library can
 * be compared line by line and byte by byte (the shape of GekkoFS's gkfs.io harness).
 *
 *   bbio_driver PATH CMD [ARGS] CMD [ARGS] ...
 *
 * Data written is a deterministic pattern: byte i of a write with seed s is (s * 131 + i) % 251. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char* path;
static int fd = -1;
static FILE* stream;

static void fill(char* buf, size_t n, long seed) {
  for (size_t i = 0; i < n; ++i) buf[i] = (char)((seed * 131 + (long)i) % 251);
}

static uint64_t checksum(const char* buf, size_t n) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
  return h;
}

static void result(const char* op, long ret) {
  printf("{\"op\": \"%s\", \"ret\": %ld, \"errno\": %d}\n", op, ret, ret < 0 ? errno : 0);
  fflush(stdout);
}

static int open_flags(const char* mode) {
  int flags = 0;
  if (strchr(mode, 'r') && strchr(mode, 'w'))
    flags = O_RDWR;
  else if (strchr(mode, 'w'))
    flags = O_WRONLY;
  if (strchr(mode, 'c')) flags |= O_CREAT;
  if (strchr(mode, 't')) flags |= O_TRUNC;
  if (strchr(mode, 'a')) flags |= O_APPEND;
  return flags;
}

struct thread_job {
  long index, size;
};

static void* thread_write(void* arg) {
  struct thread_job* job = arg;
  char* buf = malloc((size_t)job->size);
  fill(buf, (size_t)job->size, job->index);
  for (long done = 0; done < job->size; done += 4096) {
    long chunk = job->size - done < 4096 ? job->size - done : 4096;
    if (pwrite(fd, buf + done, (size_t)chunk, job->index * job->size + done) != chunk) abort();
  }
  free(buf);
  return NULL;
}

/* A child that runs in its parent's memory (clone with CLONE_VM, as glibc's posix_spawn makes
 * it) and execs through the library's wrapper: the library's state there is the parent's. */
static int exec_true(void* unused) {
  (void)unused;
  execl("/bin/true", "true", (char*)NULL);
  return 127;
}

static long clone_vm_exec(void) {
  static char stack[64 * 1024];
  const pid_t pid = clone(exec_true, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A child with a copy of its parent's memory that no fork wrapper or pthread_atfork handler saw
 * (a raw clone): it appends through the inherited descriptor and exits with exit(). */
static long clone_write_size, clone_write_seed;

static int write_and_exit(void* unused) {
  (void)unused;
  char* buf = malloc((size_t)clone_write_size);
  fill(buf, (size_t)clone_write_size, clone_write_seed);
  if (write(fd, buf, (size_t)clone_write_size) != clone_write_size) _exit(1);
  exit(0);
}

static long clone_write(long size, long seed) {
  static char stack[256 * 1024];
  clone_write_size = size;
  clone_write_seed = seed;
  const pid_t pid = clone(write_and_exit, stack + sizeof stack, SIGCHLD, NULL);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int bbio(const char* name) {
  int (*fn)(int);
  *(void**)&fn = dlsym(RTLD_DEFAULT, name); /* POSIX's way to get a function from dlsym */
  return fn ? fn(fd) : 0;                   /* without the library there is nothing to flush */
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bbio_driver PATH CMD [ARGS]...\n");
    return 2;
  }
  path = argv[1];
  for (int i = 2; i < argc; ++i) {
    const char* cmd = argv[i];
#define ARG(k) (argv[i + (k)])
#define NUM(k) atol(argv[i + (k)])
    if (!strcmp(cmd, "open")) {
      fd = open(path, open_flags(ARG(1)), 0644);
      result(cmd, fd < 0 ? -1 : 0);
      i += 1;
    } else if (!strcmp(cmd, "write") || !strcmp(cmd, "pwrite")) {
      const long n = NUM(1);
      char* buf = malloc((size_t)n + 1);
      fill(buf, (size_t)n, NUM(2));
      const long ret =
          cmd[0] == 'w' ? write(fd, buf, (size_t)n) : pwrite(fd, buf, (size_t)n, NUM(3));
      free(buf);
      result(cmd, ret);
      i += cmd[0] == 'w' ? 2 : 3;
    } else if (!strcmp(cmd, "writev") || !strcmp(cmd, "pwritev")) {
      /* three pieces of sizes N, N/2 and N/3 */
      const long n = NUM(1);
      const size_t sizes[3] = {(size_t)n, (size_t)n / 2, (size_t)n / 3};
      struct iovec iov[3];
      for (int k = 0; k < 3; ++k) {
        iov[k].iov_base = malloc(sizes[k] + 1);
        iov[k].iov_len = sizes[k];
        fill(iov[k].iov_base, sizes[k], NUM(2) + k);
      }
      const long ret = cmd[0] == 'w' ? writev(fd, iov, 3) : pwritev(fd, iov, 3, NUM(3));
      for (int k = 0; k < 3; ++k) free(iov[k].iov_base);
      result(cmd, ret);
      i += cmd[0] == 'w' ? 2 : 3;
    } else if (!strcmp(cmd, "lseek")) {
      const int whence = !strcmp(ARG(2), "set")   ? SEEK_SET
                         : !strcmp(ARG(2), "cur") ? SEEK_CUR
                                                  : SEEK_END;
      result(cmd, (long)lseek(fd, NUM(1), whence));
      i += 2;
    } else if (!strcmp(cmd, "ftruncate")) {
      result(cmd, ftruncate(fd, NUM(1)));
      i += 1;
    } else if (!strcmp(cmd, "fsync")) {
      result(cmd, fsync(fd));
    } else if (!strcmp(cmd, "fstat")) {
      struct stat st;
      const int ret = fstat(fd, &st);
      printf("{\"op\": \"fstat\", \"ret\": %d, \"size\": %ld}\n", ret, (long)st.st_size);
    } else if (!strcmp(cmd, "read") || !strcmp(cmd, "pread")) {
      const long n = NUM(1);
      char* buf = calloc((size_t)n + 1, 1);
      const long ret = cmd[0] == 'r' ? read(fd, buf, (size_t)n) : pread(fd, buf, (size_t)n, NUM(2));
      printf("{\"op\": \"%s\", \"ret\": %ld, \"sum\": %llu}\n", cmd, ret,
             (unsigned long long)checksum(buf, ret > 0 ? (size_t)ret : 0));
      free(buf);
      i += cmd[0] == 'r' ? 1 : 2;
    } else if (!strcmp(cmd, "dup")) {
      /* keep writing through a duplicate; the original stays open until "close-old" */
      static int old = -1;
      old = fd;
      fd = dup(fd);
      result(cmd, fd < 0 ? -1 : 0);
      (void)old;
    } else if (!strcmp(cmd, "close")) {
      result(cmd, close(fd));
    } else if (!strcmp(cmd, "rename")) {
      /* the file gets the name ARG(1); later commands use it */
      result(cmd, rename(path, ARG(1)));
      path = ARG(1);
      i += 1;
    } else if (!strcmp(cmd, "unlink")) {
      result(cmd, unlink(path));
    } else if (!strcmp(cmd, "peek")) {
      /* The file's size on disk right now, as another process sees it: a raw system call, which
       * no interposer sees (stat itself shows the size the program wrote). */
      struct stat st;
      const long ok = syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
      printf("{\"op\": \"peek\", \"size\": %ld}\n", ok ? (long)st.st_size : -1L);
    } else if (!strcmp(cmd, "flush")) {
      result(cmd, bbio("BBIO_Flush"));
    } else if (!strcmp(cmd, "fork-write")) {
      /* The child appends N bytes through the inherited descriptor, then exits. */
      const long n = NUM(1);
      fflush(stdout);
      const pid_t pid = fork();
      if (pid == 0) {
        char* buf = malloc((size_t)n);
        fill(buf, (size_t)n, NUM(2));
        if (write(fd, buf, (size_t)n) != n) _exit(1);
        exit(0);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      result(cmd, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      i += 2;
    } else if (!strcmp(cmd, "threads")) {
      /* T threads each pwrite N bytes to their own region, in 4 KiB pieces */
      const long t = NUM(1);
      pthread_t ids[64];
      struct thread_job jobs[64];
      for (long k = 0; k < t && k < 64; ++k) {
        jobs[k].index = k;
        jobs[k].size = NUM(2);
        pthread_create(&ids[k], NULL, thread_write, &jobs[k]);
      }
      for (long k = 0; k < t && k < 64; ++k) pthread_join(ids[k], NULL);
      result(cmd, 0);
      i += 2;
    } else if (!strcmp(cmd, "fopen")) {
      stream = fopen(path, ARG(1));
      result(cmd, stream ? 0 : -1);
      i += 1;
    } else if (!strcmp(cmd, "freopen")) {
      stream = freopen(path, ARG(1), stream);
      result(cmd, stream ? 0 : -1);
      i += 1;
    } else if (!strcmp(cmd, "stdout-mix")) {
      /* N bytes through stdout's FILE made a duplicate of the file (libc's own write path) */
      const long n = NUM(1);
      char* buf = malloc((size_t)n);
      fill(buf, (size_t)n, 9);
      fflush(stdout);
      const int saved = dup(STDOUT_FILENO);
      dup2(fd, STDOUT_FILENO);
      const long ret = (long)fwrite(buf, 1, (size_t)n, stdout);
      fflush(stdout);
      dup2(saved, STDOUT_FILENO);
      close(saved);
      free(buf);
      result(cmd, ret);
      i += 1;
    } else if (!strcmp(cmd, "fwrite")) {
      const long n = NUM(1);
      char* buf = malloc((size_t)n);
      fill(buf, (size_t)n, NUM(2));
      result(cmd, (long)fwrite(buf, 1, (size_t)n, stream));
      free(buf);
      i += 2;
    } else if (!strcmp(cmd, "fputs")) {
      result(cmd, fputs(ARG(1), stream));
      i += 1;
    } else if (!strcmp(cmd, "fputc")) {
      result(cmd, fputc(ARG(1)[0], stream));
      i += 1;
    } else if (!strcmp(cmd, "fprintf")) {
      result(cmd, fprintf(stream, "value=%ld pi=%.3f\n", NUM(1), 3.14159));
      i += 1;
    } else if (!strcmp(cmd, "fseek")) {
      result(cmd, fseek(stream, NUM(1), SEEK_SET));
      i += 1;
    } else if (!strcmp(cmd, "ftell")) {
      result(cmd, ftell(stream));
    } else if (!strcmp(cmd, "fileno-fsync")) {
      fflush(stream);
      result(cmd, fsync(fileno(stream)));
    } else if (!strcmp(cmd, "fflush")) {
      result(cmd, fflush(stream));
    } else if (!strcmp(cmd, "fclose")) {
      result(cmd, fclose(stream));
    } else if (!strcmp(cmd, "sleep")) {
      usleep((useconds_t)(NUM(1) * 1000)); /* milliseconds */
      i += 1;
    } else if (!strcmp(cmd, "exec")) {
      /* Replace the process: staged data must reach the file before the image is gone. */
      fflush(stdout);
      execl("/bin/true", "true", (char*)NULL);
      result(cmd, -1);
    } else if (!strcmp(cmd, "clone-vm-exec")) {
      fflush(stdout);
      result(cmd, clone_vm_exec());
    } else if (!strcmp(cmd, "clone-write")) {
      fflush(stdout);
      result(cmd, clone_write(NUM(1), NUM(2)));
      i += 2;
    } else if (!strcmp(cmd, "pipe")) {
      /* Pipes are never staged: what goes in comes out at once. */
      int ends[2];
      char out[64] = {0};
      const int ok = pipe(ends) == 0 && write(ends[1], "through the pipe", 16) == 16 &&
                     read(ends[0], out, sizeof out) == 16;
      printf("{\"op\": \"pipe\", \"ret\": %d, \"sum\": %llu}\n", ok ? 0 : -1,
             (unsigned long long)checksum(out, 16));
      close(ends[0]);
      close(ends[1]);
    } else if (!strcmp(cmd, "kill")) {
      fflush(stdout);
      kill(getpid(), SIGKILL);
    } else if (!strcmp(cmd, "_exit")) {
      fflush(stdout);
      _exit(0);
    } else {
      fprintf(stderr, "bbio_driver: unknown command %s\n", cmd);
      return 2;
    }
  }
  return 0;
}
