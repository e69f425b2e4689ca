// The interposed calls that must see, or change, what is staged without being reads or writes:
// mmap, stat by path or descriptor, times, modes, owners, sizes and allocation, copies between
// descriptors, closing ranges of descriptors, asynchronous I/O and sync. Each either settles the
// staged file first (its bytes reach the file, so the call acts on them in program order), shows
// the program the file as it wrote it (stat), or sends the file to plain I/O for good (mmap,
// asynchronous I/O). docs/staging-library.md lists them call by call.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "runtime/bbio/prefetched.hpp"
#include "runtime/bbio/registry.hpp"
#include "runtime/bbio/wrappers.hpp"
#include "storage/real.hpp"

using namespace harmonia::bbio;
using harmonia::storage::real;
using harmonia::storage::resolving_real;

namespace {

/// The staged file behind `fd`: staged itself, or another descriptor of a staged file.
StagedFile* staged_behind(int fd) {
  if (StagedFile* file = staged(fd)) return file;
  if (fd < 0 || !any_staged()) return nullptr;
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  return staged_inode(st.st_dev, st.st_ino);
}

/// `find()`, or nullptr if it threw (the call then runs as it would without the library).
template <class Find>
StagedFile* found(Find find) noexcept {
  try {
    return find();
  } catch (...) {
    return nullptr;
  }
}

/// Runs `call` once the file behind `fd`, if staged, is settled.
template <class Call>
auto fd_settled(int fd, Call call) -> decltype(call()) {
  StagedFile* file = found([&] { return staged_behind(fd); });
  return file ? flushed_then(file, call) : call();
}

/// Runs `call` once the staged file `path` names (relative to `dirfd`), if any, is settled.
template <class Call>
auto path_settled(int dirfd, const char* path, int at_flags, Call call) -> decltype(call()) {
  StagedFile* file = found([&] { return staged_path(dirfd, path, at_flags); });
  return file ? flushed_then(file, call) : call();
}

/// The real stat call, then the staged file's size and times shown over it.
template <class Stat, class Call>
int overlaid(Stat* st, Call call) {
  const int result = call();
  if (result != 0 || !any_staged()) return result;
  guarded([&] {
    if (StagedFile* file = staged_inode(st->st_dev, st->st_ino)) {
      std::lock_guard lock(file->mutex);
      file->overlay(*st);
    }
    return 0;
  });
  return result;
}

int to_plain_io(int fd) {
  return fd >= 0 ? guarded([&] { return plain_io_fd(fd); }) : 0;
}

}  // namespace

// ---- mapping: the bytes must be in the file, and stay coherent: plain I/O from then on -----

HARMONIA_EXPORT void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (resolving_real())  // an allocator inside dlsym: nothing can be staged yet
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, length, prot, flags, fd, offset));
  if (!(flags & MAP_ANONYMOUS) && to_plain_io(fd) != 0) return MAP_FAILED;
  return real().mmap(addr, length, prot, flags, fd, offset);
}

HARMONIA_EXPORT void* mmap64(void* addr, size_t length, int prot, int flags, int fd,
                             off64_t offset) {
  if (resolving_real())
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, length, prot, flags, fd, offset));
  if (!(flags & MAP_ANONYMOUS) && to_plain_io(fd) != 0) return MAP_FAILED;
  return real().mmap64(addr, length, prot, flags, fd, offset);
}

// ---- stat by path: the size and times the program wrote ---------------------------------

HARMONIA_EXPORT int stat(const char* path, struct stat* st) {
  return overlaid(st, [&] { return real().stat(path, st); });
}
HARMONIA_EXPORT int stat64(const char* path, struct stat64* st) {
  return overlaid(st, [&] { return real().stat64(path, st); });
}
HARMONIA_EXPORT int lstat(const char* path, struct stat* st) {
  return overlaid(st, [&] { return real().lstat(path, st); });
}
HARMONIA_EXPORT int lstat64(const char* path, struct stat64* st) {
  return overlaid(st, [&] { return real().lstat64(path, st); });
}
HARMONIA_EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return overlaid(st, [&] { return real().fstatat(dirfd, path, st, flags); });
}
HARMONIA_EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  return overlaid(st, [&] { return real().fstatat64(dirfd, path, st, flags); });
}

HARMONIA_EXPORT int statx(int dirfd, const char* path, int flags, unsigned int mask,
                          struct statx* st) {
  const int result = real().statx(dirfd, path, flags, mask, st);
  if (result != 0 || !any_staged() || !(st->stx_mask & STATX_INO)) return result;
  guarded([&] {
    if (StagedFile* file =
            staged_inode(makedev(st->stx_dev_major, st->stx_dev_minor), st->stx_ino)) {
      std::lock_guard lock(file->mutex);
      file->overlay(*st);
    }
    return 0;
  });
  return result;
}

// ---- times, modes, owners: after the writes made before them ----------------------------

HARMONIA_EXPORT int futimens(int fd, const struct timespec times[2]) {
  return fd_settled(fd, [&] { return real().futimens(fd, times); });
}
HARMONIA_EXPORT int utimensat(int dirfd, const char* path, const struct timespec times[2],
                              int flags) {
  return path_settled(dirfd, path, flags,
                      [&] { return real().utimensat(dirfd, path, times, flags); });
}
HARMONIA_EXPORT int futimes(int fd, const struct timeval times[2]) {
  return fd_settled(fd, [&] { return real().futimes(fd, times); });
}
HARMONIA_EXPORT int utimes(const char* path, const struct timeval times[2]) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().utimes(path, times); });
}
HARMONIA_EXPORT int lutimes(const char* path, const struct timeval times[2]) {
  return path_settled(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
                      [&] { return real().lutimes(path, times); });
}
HARMONIA_EXPORT int futimesat(int dirfd, const char* path, const struct timeval times[2]) {
  if (!path) return fd_settled(dirfd, [&] { return real().futimesat(dirfd, path, times); });
  return path_settled(dirfd, path, 0, [&] { return real().futimesat(dirfd, path, times); });
}
HARMONIA_EXPORT int utime(const char* path, const struct utimbuf* times) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().utime(path, times); });
}

HARMONIA_EXPORT int fchmod(int fd, mode_t mode) {
  return fd_settled(fd, [&] { return real().fchmod(fd, mode); });
}
HARMONIA_EXPORT int chmod(const char* path, mode_t mode) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().chmod(path, mode); });
}
HARMONIA_EXPORT int fchmodat(int dirfd, const char* path, mode_t mode, int flags) {
  return path_settled(dirfd, path, flags,
                      [&] { return real().fchmodat(dirfd, path, mode, flags); });
}
HARMONIA_EXPORT int fchown(int fd, uid_t owner, gid_t group) {
  return fd_settled(fd, [&] { return real().fchown(fd, owner, group); });
}
HARMONIA_EXPORT int chown(const char* path, uid_t owner, gid_t group) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().chown(path, owner, group); });
}
HARMONIA_EXPORT int lchown(const char* path, uid_t owner, gid_t group) {
  return path_settled(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
                      [&] { return real().lchown(path, owner, group); });
}
HARMONIA_EXPORT int fchownat(int dirfd, const char* path, uid_t owner, gid_t group, int flags) {
  return path_settled(dirfd, path, flags,
                      [&] { return real().fchownat(dirfd, path, owner, group, flags); });
}

// ---- size and allocation: staged bytes first, then the change ---------------------------

HARMONIA_EXPORT int truncate(const char* path, off_t length) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().truncate(path, length); });
}
HARMONIA_EXPORT int truncate64(const char* path, off64_t length) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().truncate64(path, length); });
}
HARMONIA_EXPORT int fallocate(int fd, int mode, off_t offset, off_t length) {
  return fd_settled(fd, [&] { return real().fallocate(fd, mode, offset, length); });
}
HARMONIA_EXPORT int fallocate64(int fd, int mode, off64_t offset, off64_t length) {
  return fd_settled(fd, [&] { return real().fallocate64(fd, mode, offset, length); });
}
// posix_fallocate returns an error number instead of setting errno.
HARMONIA_EXPORT int posix_fallocate(int fd, off_t offset, off_t length) {
  const int result = fd_settled(fd, [&] { return real().posix_fallocate(fd, offset, length); });
  return result == -1 ? errno : result;
}
HARMONIA_EXPORT int posix_fallocate64(int fd, off64_t offset, off64_t length) {
  const int result = fd_settled(fd, [&] { return real().posix_fallocate64(fd, offset, length); });
  return result == -1 ? errno : result;
}

// ---- copies between descriptors: both ends settled, positions taken back ----------------

HARMONIA_EXPORT ssize_t copy_file_range(int in, off64_t* in_offset, int out, off64_t* out_offset,
                                        size_t length, unsigned int flags) {
  return fd_settled(in, [&] {
    return fd_settled(
        out, [&] { return real().copy_file_range(in, in_offset, out, out_offset, length, flags); });
  });
}
HARMONIA_EXPORT ssize_t sendfile(int out, int in, off_t* offset, size_t count) {
  return fd_settled(
      in, [&] { return fd_settled(out, [&] { return real().sendfile(out, in, offset, count); }); });
}
HARMONIA_EXPORT ssize_t sendfile64(int out, int in, off64_t* offset, size_t count) {
  return fd_settled(in, [&] {
    return fd_settled(out, [&] { return real().sendfile64(out, in, offset, count); });
  });
}
HARMONIA_EXPORT ssize_t splice(int in, off64_t* in_offset, int out, off64_t* out_offset,
                               size_t length, unsigned int flags) {
  return fd_settled(in, [&] {
    return fd_settled(out,
                      [&] { return real().splice(in, in_offset, out, out_offset, length, flags); });
  });
}

// ---- closing many descriptors at once ----------------------------------------------------

HARMONIA_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  // With CLOSE_RANGE_CLOEXEC nothing closes now; exec flushes everything first.
  if (!(flags & CLOSE_RANGE_CLOEXEC)) prefetched::closing_range(first, last);
  const int flushed =
      (flags & CLOSE_RANGE_CLOEXEC) ? 0 : guarded([&] { return forget_range(first, last); });
  const int saved = errno;
  const int closed = real().close_range(first, last, flags);
  if (flushed != 0) {
    errno = saved;
    return -1;
  }
  return closed;
}
HARMONIA_EXPORT void closefrom(int first) {
  if (first >= 0) prefetched::closing_range(static_cast<unsigned>(first), ~0U);
  if (first >= 0) guarded([&] { return forget_range(static_cast<unsigned>(first), ~0U); });
  real().closefrom(first);
}

// ---- asynchronous I/O runs on libc's threads, out of our sight: plain I/O first ----------

HARMONIA_EXPORT int aio_read(struct aiocb* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_read(request);
}
HARMONIA_EXPORT int aio_read64(struct aiocb64* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_read64(request);
}
HARMONIA_EXPORT int aio_write(struct aiocb* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_write(request);
}
HARMONIA_EXPORT int aio_write64(struct aiocb64* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_write64(request);
}
HARMONIA_EXPORT int aio_fsync(int operation, struct aiocb* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_fsync(operation, request);
}
HARMONIA_EXPORT int aio_fsync64(int operation, struct aiocb64* request) {
  if (to_plain_io(request->aio_fildes) != 0) return -1;
  return real().aio_fsync64(operation, request);
}
HARMONIA_EXPORT int lio_listio(int mode, struct aiocb* const list[], int count,
                               struct sigevent* event) {
  for (int i = 0; i < count; ++i)
    if (list[i] && to_plain_io(list[i]->aio_fildes) != 0) return -1;
  return real().lio_listio(mode, list, count, event);
}
HARMONIA_EXPORT int lio_listio64(int mode, struct aiocb64* const list[], int count,
                                 struct sigevent* event) {
  for (int i = 0; i < count; ++i)
    if (list[i] && to_plain_io(list[i]->aio_fildes) != 0) return -1;
  return real().lio_listio64(mode, list, count, event);
}

// ---- sync: what is staged is written before the caches are -----------------------------

HARMONIA_EXPORT void sync(void) {
  guarded(flush_all);
  real().sync();
}
HARMONIA_EXPORT int syncfs(int fd) {
  if (guarded(flush_all) != 0) return -1;
  return real().syncfs(fd);
}
