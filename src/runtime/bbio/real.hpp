#pragma once
// The libc functions libharmonia interposes: the one list of wrapped symbols, and their real
// implementations (the next definition after ours, found with dlsym(RTLD_NEXT)). Library code
// calls only these real functions, never the wrappers, so it cannot recurse into itself.

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdio>

namespace harmonia::bbio {

// X(name, return type, parameter list)
#define HARMONIA_WRAPPED(X)                                              \
  X(open, int, (const char*, int, ...))                                  \
  X(open64, int, (const char*, int, ...))                                \
  X(openat, int, (int, const char*, int, ...))                           \
  X(openat64, int, (int, const char*, int, ...))                         \
  X(creat, int, (const char*, mode_t))                                   \
  X(creat64, int, (const char*, mode_t))                                 \
  X(close, int, (int))                                                   \
  X(write, ssize_t, (int, const void*, size_t))                          \
  X(pwrite, ssize_t, (int, const void*, size_t, off_t))                  \
  X(pwrite64, ssize_t, (int, const void*, size_t, off64_t))              \
  X(writev, ssize_t, (int, const struct iovec*, int))                    \
  X(pwritev, ssize_t, (int, const struct iovec*, int, off_t))            \
  X(pwritev64, ssize_t, (int, const struct iovec*, int, off64_t))        \
  X(pwritev2, ssize_t, (int, const struct iovec*, int, off_t, int))      \
  X(pwritev64v2, ssize_t, (int, const struct iovec*, int, off64_t, int)) \
  X(read, ssize_t, (int, void*, size_t))                                 \
  X(pread, ssize_t, (int, void*, size_t, off_t))                         \
  X(pread64, ssize_t, (int, void*, size_t, off64_t))                     \
  X(readv, ssize_t, (int, const struct iovec*, int))                     \
  X(preadv, ssize_t, (int, const struct iovec*, int, off_t))             \
  X(preadv64, ssize_t, (int, const struct iovec*, int, off64_t))         \
  X(lseek, off_t, (int, off_t, int))                                     \
  X(lseek64, off64_t, (int, off64_t, int))                               \
  X(ftruncate, int, (int, off_t))                                        \
  X(ftruncate64, int, (int, off64_t))                                    \
  X(fsync, int, (int))                                                   \
  X(fdatasync, int, (int))                                               \
  X(fstat, int, (int, struct stat*))                                     \
  X(fstat64, int, (int, struct stat64*))                                 \
  X(dup, int, (int))                                                     \
  X(dup2, int, (int, int))                                               \
  X(dup3, int, (int, int, int))                                          \
  X(fcntl, int, (int, int, ...))                                         \
  X(fork, pid_t, (void))                                                 \
  X(execve, int, (const char*, char* const[], char* const[]))            \
  X(execv, int, (const char*, char* const[]))                            \
  X(execvp, int, (const char*, char* const[]))                           \
  X(execvpe, int, (const char*, char* const[], char* const[]))           \
  X(fexecve, int, (int, char* const[], char* const[]))                   \
  X(_exit, void, (int))                                                  \
  X(_Exit, void, (int))                                                  \
  X(fopen, FILE*, (const char*, const char*))                            \
  X(fopen64, FILE*, (const char*, const char*))                          \
  X(fdopen, FILE*, (int, const char*))

struct RealFunctions {
#define HARMONIA_DECLARE_REAL(name, ret, params) ret(*name) params;
  HARMONIA_WRAPPED(HARMONIA_DECLARE_REAL)
#undef HARMONIA_DECLARE_REAL
};

/// The real functions; resolved on first use, safe to call before constructors have run.
const RealFunctions& real();

/// Writes all of `iov` at `offset` with the real pwritev, retrying partial writes and EINTR;
/// the bytes written, or -1 with errno.
ssize_t pwritev_all(int fd, const struct iovec* iov, int count, off64_t offset);

}  // namespace harmonia::bbio
