// stdio on staged files. glibc's FILE writes through its own internal write, not through the
// interposed one, so a FILE opened for writing on a staged file is built with fopencookie over
// the staged descriptor: every stdio function (fwrite, fputs, fputc, fprintf, fflush, fclose,
// ...) then reaches the staging code through the cookie, with libc's own buffering unchanged.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "runtime/bbio/real.hpp"
#include "runtime/bbio/registry.hpp"

using namespace harmonia::bbio;

#define HARMONIA_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
ssize_t read(int, void*, size_t);
ssize_t write(int, const void*, size_t);
off64_t lseek64(int, off64_t, int);
int close(int);
int open(const char*, int, ...);
}

namespace {

int fd_of(void* cookie) { return static_cast<int>(reinterpret_cast<intptr_t>(cookie)); }

ssize_t cookie_read(void* cookie, char* buf, size_t size) { return read(fd_of(cookie), buf, size); }

ssize_t cookie_write(void* cookie, const char* buf, size_t size) {
  // The stream must not see a negative count: 0 reports the error (errno is set).
  const ssize_t n = write(fd_of(cookie), buf, size);
  return n < 0 ? 0 : n;
}

int cookie_seek(void* cookie, off64_t* position, int whence) {
  const off64_t at = lseek64(fd_of(cookie), *position, whence);
  if (at < 0) return -1;
  *position = at;
  return 0;
}

int cookie_close(void* cookie) { return close(fd_of(cookie)); }

/// open(2) flags for an fopen mode; -1 for modes we leave to libc (unknown letters, ",ccs=").
int flags_for(const char* mode) {
  int flags;
  switch (mode[0]) {
    case 'r':
      flags = O_RDONLY;
      break;
    case 'w':
      flags = O_WRONLY | O_CREAT | O_TRUNC;
      break;
    case 'a':
      flags = O_WRONLY | O_CREAT | O_APPEND;
      break;
    default:
      return -1;
  }
  for (const char* p = mode + 1; *p; ++p) {
    switch (*p) {
      case '+':
        flags = (flags & ~O_ACCMODE) | O_RDWR;
        break;
      case 'b':
        break;
      case 'x':
        flags |= O_EXCL;
        break;
      case 'e':
        flags |= O_CLOEXEC;
        break;
      case 'm':
        break;  // mmap reads: a hint
      default:
        return -1;
    }
  }
  return flags;
}

FILE* cookie_stream(int fd, const char* mode) {
  const cookie_io_functions_t io{cookie_read, cookie_write, cookie_seek, cookie_close};
  FILE* stream = fopencookie(reinterpret_cast<void*>(static_cast<intptr_t>(fd)), mode, io);
  // fileno() of a cookie stream is -1; programs that fsync(fileno(f)) need the real one.
  if (stream) stream->_fileno = fd;
  return stream;
}

FILE* open_stream(const char* path, const char* mode,
                  FILE* (*real_fopen)(const char*, const char*)) {
  const int flags = flags_for(mode);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return real_fopen(path, mode);
  const int fd = open(path, flags, 0666);
  if (fd < 0) return nullptr;
  FILE* stream = staged(fd) ? cookie_stream(fd, mode) : real().fdopen(fd, mode);
  if (!stream) {
    const int saved = errno;
    close(fd);
    errno = saved;
  }
  return stream;
}

}  // namespace

HARMONIA_EXPORT FILE* fopen(const char* path, const char* mode) {
  return open_stream(path, mode, real().fopen);
}

HARMONIA_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return open_stream(path, mode, real().fopen64);
}

HARMONIA_EXPORT FILE* fdopen(int fd, const char* mode) {
  if (!staged(fd) || flags_for(mode) < 0) return real().fdopen(fd, mode);
  return cookie_stream(fd, mode);
}
