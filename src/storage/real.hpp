#pragma once
// The libc functions libharmonia interposes: the one list of wrapped symbols (libharmonia's
// version script is generated from it), and their real implementations (the next definition
// after the library's, found with dlsym(RTLD_NEXT)). Storage code, libharmonia's own and the
// buffer nodes' (where the next definition is libc's), calls only these real functions, never
// the wrappers, so inside an application it cannot recurse into the library.

#include <aio.h>
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <utime.h>

#include <cstdio>

namespace harmonia::storage {

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
  X(preadv2, ssize_t, (int, const struct iovec*, int, off_t, int))       \
  X(preadv64v2, ssize_t, (int, const struct iovec*, int, off64_t, int))  \
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
  X(fcntl64, int, (int, int, ...))                                       \
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
  X(fdopen, FILE*, (int, const char*))                                   \
  X(freopen, FILE*, (const char*, const char*, FILE*))                   \
  X(freopen64, FILE*, (const char*, const char*, FILE*))                 \
  X(fclose, int, (FILE*))                                                \
  X(pclose, int, (FILE*))                                                \
  X(closedir, int, (DIR*))                                               \
  HARMONIA_WRAPPED_COHERENCE(X)                                          \
  HARMONIA_WRAPPED_SPAWN(X)

// Calls that must see, or change, what is staged (coherence.cpp).
#define HARMONIA_WRAPPED_COHERENCE(X)                                               \
  X(__open_2, int, (const char*, int))                                              \
  X(__open64_2, int, (const char*, int))                                            \
  X(__openat_2, int, (int, const char*, int))                                       \
  X(__openat64_2, int, (int, const char*, int))                                     \
  X(mmap, void*, (void*, size_t, int, int, int, off_t))                             \
  X(mmap64, void*, (void*, size_t, int, int, int, off64_t))                         \
  X(stat, int, (const char*, struct stat*))                                         \
  X(stat64, int, (const char*, struct stat64*))                                     \
  X(lstat, int, (const char*, struct stat*))                                        \
  X(lstat64, int, (const char*, struct stat64*))                                    \
  X(fstatat, int, (int, const char*, struct stat*, int))                            \
  X(fstatat64, int, (int, const char*, struct stat64*, int))                        \
  X(statx, int, (int, const char*, int, unsigned int, struct statx*))               \
  X(futimens, int, (int, const struct timespec*))                                   \
  X(utimensat, int, (int, const char*, const struct timespec*, int))                \
  X(futimes, int, (int, const struct timeval*))                                     \
  X(utimes, int, (const char*, const struct timeval*))                              \
  X(lutimes, int, (const char*, const struct timeval*))                             \
  X(futimesat, int, (int, const char*, const struct timeval*))                      \
  X(utime, int, (const char*, const struct utimbuf*))                               \
  X(fchmod, int, (int, mode_t))                                                     \
  X(chmod, int, (const char*, mode_t))                                              \
  X(fchmodat, int, (int, const char*, mode_t, int))                                 \
  X(fchown, int, (int, uid_t, gid_t))                                               \
  X(chown, int, (const char*, uid_t, gid_t))                                        \
  X(lchown, int, (const char*, uid_t, gid_t))                                       \
  X(fchownat, int, (int, const char*, uid_t, gid_t, int))                           \
  X(truncate, int, (const char*, off_t))                                            \
  X(truncate64, int, (const char*, off64_t))                                        \
  X(rename, int, (const char*, const char*))                                        \
  X(renameat, int, (int, const char*, int, const char*))                            \
  X(renameat2, int, (int, const char*, int, const char*, unsigned int))             \
  X(link, int, (const char*, const char*))                                          \
  X(linkat, int, (int, const char*, int, const char*, int))                         \
  X(unlink, int, (const char*))                                                     \
  X(unlinkat, int, (int, const char*, int))                                         \
  X(fallocate, int, (int, int, off_t, off_t))                                       \
  X(fallocate64, int, (int, int, off64_t, off64_t))                                 \
  X(posix_fallocate, int, (int, off_t, off_t))                                      \
  X(posix_fallocate64, int, (int, off64_t, off64_t))                                \
  X(copy_file_range, ssize_t, (int, off64_t*, int, off64_t*, size_t, unsigned int)) \
  X(sendfile, ssize_t, (int, int, off_t*, size_t))                                  \
  X(sendfile64, ssize_t, (int, int, off64_t*, size_t))                              \
  X(splice, ssize_t, (int, off64_t*, int, off64_t*, size_t, unsigned int))          \
  X(close_range, int, (unsigned int, unsigned int, int))                            \
  X(closefrom, void, (int))                                                         \
  X(aio_read, int, (struct aiocb*))                                                 \
  X(aio_read64, int, (struct aiocb64*))                                             \
  X(aio_write, int, (struct aiocb*))                                                \
  X(aio_write64, int, (struct aiocb64*))                                            \
  X(aio_fsync, int, (int, struct aiocb*))                                           \
  X(aio_fsync64, int, (int, struct aiocb64*))                                       \
  X(lio_listio, int, (int, struct aiocb* const[], int, struct sigevent*))           \
  X(lio_listio64, int, (int, struct aiocb64* const[], int, struct sigevent*))       \
  X(sync, void, (void))                                                             \
  X(syncfs, int, (int))

// Calls that start a program in a new process without the exec wrapper (glibc's own exec in a
// child that shares the caller's memory): the fork wrapper's work comes first (interpose.cpp).
#define HARMONIA_WRAPPED_SPAWN(X)                                                      \
  X(posix_spawn, int,                                                                  \
    (pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*, \
     char* const[], char* const[]))                                                    \
  X(posix_spawnp, int,                                                                 \
    (pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*, \
     char* const[], char* const[]))                                                    \
  X(system, int, (const char*))                                                        \
  X(popen, FILE*, (const char*, const char*))

struct RealFunctions {
#define HARMONIA_DECLARE_REAL(name, ret, params) ret(*name) params;
  HARMONIA_WRAPPED(HARMONIA_DECLARE_REAL)
#undef HARMONIA_DECLARE_REAL
};

/// The real functions; resolved on first use, safe to call before constructors have run.
const RealFunctions& real();
/// Whether this thread is resolving the real functions now: a wrapper called from inside
/// dlsym (an allocator's mmap) must not wait for real().
bool resolving_real();

/// Writes all of `iov` at `offset` with the real pwritev, retrying partial writes and EINTR;
/// the bytes written, or -1 with errno.
ssize_t pwritev_all(int fd, const struct iovec* iov, int count, off64_t offset);

}  // namespace harmonia::storage
