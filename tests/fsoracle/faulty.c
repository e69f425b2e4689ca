/* A deliberately wrong interposer, to show that the differential tester catches what a staging
 * library could get wrong (tests/runtime/test_differential.py). FSORACLE_FAULT picks the fault:
 *   errno   a write that succeeds leaves errno ENOENT
 *   stat    fstat reports one byte less than the file holds
 *   rename  rename returns 0 and renames nothing */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fault(const char* name) {
  const char* chosen = getenv("FSORACLE_FAULT");
  return chosen && !strcmp(chosen, name);
}

ssize_t write(int fd, const void* buf, size_t count) {
  ssize_t (*real)(int, const void*, size_t);
  *(void**)&real = dlsym(RTLD_NEXT, "write");
  const ssize_t done = real(fd, buf, count);
  if (done >= 0 && fd > 2 && fault("errno")) errno = ENOENT;
  return done;
}

int fstat(int fd, struct stat* st) {
  int (*real)(int, struct stat*);
  *(void**)&real = dlsym(RTLD_NEXT, "fstat");
  const int done = real(fd, st);
  if (done == 0 && st->st_size > 0 && S_ISREG(st->st_mode) && fault("stat")) --st->st_size;
  return done;
}

int rename(const char* from, const char* to) {
  int (*real)(const char*, const char*);
  *(void**)&real = dlsym(RTLD_NEXT, "rename");
  return fault("rename") ? 0 : real(from, to);
}
