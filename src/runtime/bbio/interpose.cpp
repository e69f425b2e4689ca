// The interposed libc functions. Every wrapper has the same shape: if the descriptor is staged,
// handle it under the file's lock; otherwise call the real function. No exception leaves a
// wrapper: anything unexpected becomes errno EIO.
#include <fcntl.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/open_files.hpp"
#include "runtime/bbio/placement.hpp"
#include "runtime/bbio/prefetched.hpp"
#include "runtime/bbio/registry.hpp"
#include "runtime/bbio/wrappers.hpp"
#include "storage/real.hpp"

using namespace harmonia::bbio;
using harmonia::storage::real;

namespace {

bool has_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

int opened(int fd, int flags, bool created = false) {
  if (fd >= 0) {
    open_files::changed(fd);
    const int saved = errno;
    guarded([&] {
      consider(fd, flags, created);
      return 0;
    });
    prefetched::opened(fd, flags);
    errno = saved;
  }
  return fd;
}

/// `open_with(flags)`, then opened(). A creating open that staging may take is tried with
/// O_EXCL first: a file the call creates cannot be open through another descriptor of the
/// process, so staging it needs no look at every descriptor. A file that exists is then opened
/// as asked, and errno is what that call leaves.
template <class Open>
int open_noting_creation(int flags, Open open_with) {
  if ((flags & O_CREAT) && !(flags & O_EXCL) &&
      guarded([&] { return stages_new_files(flags) ? 1 : 0; }) == 1) {
    const int saved = errno;
    const int fd = open_with(flags | O_EXCL);
    if (fd >= 0) return opened(fd, flags, true);
    errno = saved;
  }
  return opened(open_with(flags), flags, (flags & O_CREAT) && (flags & O_EXCL));
}

bool valid_iov_count(int count) {
  if (count >= 0 && count <= IOV_MAX) return true;
  errno = EINVAL;
  return false;
}

ssize_t staged_write(int fd, StagedFile* file, const struct iovec* iov, int count) {
  if (!valid_iov_count(count)) return -1;
  return staged_or_plain(
      file, [&] { return file->write(iov, count); }, [&] { return real().writev(fd, iov, count); });
}

ssize_t staged_pwrite(int fd, StagedFile* file, const struct iovec* iov, int count,
                      off64_t offset) {
  if (!valid_iov_count(count)) return -1;
  return staged_or_plain(
      file, [&] { return file->write_at(iov, count, offset); },
      [&] { return real().pwritev64(fd, iov, count, offset); });
}

/// A read served by the buffer nodes when they hold the range (offset < 0: at the position);
/// otherwise flushed_then(call).
template <class Call>
ssize_t held_or_flushed_then(StagedFile* file, const struct iovec* iov, int count, off64_t offset,
                             Call call) {
  return staged_or_plain(
      file,
      [&]() -> ssize_t {
        const ssize_t held = file->read_held(iov, count, offset);
        return held != StagedFile::kNotHeld ? held : settled_then(file, call);
      },
      call);
}

int flushed_dup(int fd, int new_fd) {
  if (new_fd >= 0) {
    open_files::changed(new_fd);
    guarded([&] {
      alias(fd, new_fd);
      return 0;
    });
    prefetched::duplicated(fd, new_fd);
  }
  return new_fd;
}

/// Where a file about to be created goes (the PFS server adapter); "" to open it as asked.
std::string placement(int dirfd, const char* path, int flags) noexcept {
  try {
    const int saved = errno;
    std::string placed = placed_path(dirfd, path, flags);
    errno = saved;
    return placed;
  } catch (...) {
    return "";
  }
}

}  // namespace

// ---- open / close ------------------------------------------------------------------------

/// An open of `path` (relative to `dirfd`) with `real_open(target, flags)`: other processes'
/// staged bytes settled first, placed where the PFS adapter puts new files, then staged.
template <class RealOpen>
static int open_file(int dirfd, const char* path, int flags, RealOpen real_open) {
  if (guarded([&] { return before_open(dirfd, path, flags); }) != 0) return -1;
  const std::string placed = placement(dirfd, path, flags);
  const char* target = placed.empty() ? path : placed.c_str();
  return open_noting_creation(flags, [&](int f) { return real_open(target, f); });
}

/// The mode argument an open that creates a file takes after its flags (`mode_t mode`).
#define HARMONIA_OPEN_MODE(flags)                \
  mode_t mode = 0;                               \
  if (has_mode(flags)) {                         \
    va_list ap;                                  \
    va_start(ap, flags);                         \
    mode = static_cast<mode_t>(va_arg(ap, int)); \
    va_end(ap);                                  \
  }

#define HARMONIA_OPEN_WRAPPER(name)                                                            \
  HARMONIA_EXPORT int name(const char* path, int flags, ...) {                                 \
    HARMONIA_OPEN_MODE(flags)                                                                  \
    return open_file(AT_FDCWD, path, flags,                                                    \
                     [&](const char* target, int f) { return real().name(target, f, mode); }); \
  }
HARMONIA_OPEN_WRAPPER(open)
HARMONIA_OPEN_WRAPPER(open64)

#define HARMONIA_OPENAT_WRAPPER(name)                                     \
  HARMONIA_EXPORT int name(int dirfd, const char* path, int flags, ...) { \
    HARMONIA_OPEN_MODE(flags)                                             \
    return open_file(dirfd, path, flags, [&](const char* target, int f) { \
      return real().name(dirfd, target, f, mode);                         \
    });                                                                   \
  }
HARMONIA_OPENAT_WRAPPER(openat)
HARMONIA_OPENAT_WRAPPER(openat64)

// The _FORTIFY_SOURCE forms, for opens without O_CREAT whose flags the compiler cannot see.
HARMONIA_EXPORT int __open_2(const char* path, int flags) {
  if (guarded([&] { return before_open(AT_FDCWD, path, flags); }) != 0) return -1;
  return opened(real().__open_2(path, flags), flags);
}
HARMONIA_EXPORT int __open64_2(const char* path, int flags) {
  if (guarded([&] { return before_open(AT_FDCWD, path, flags); }) != 0) return -1;
  return opened(real().__open64_2(path, flags), flags);
}
HARMONIA_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  if (guarded([&] { return before_open(dirfd, path, flags); }) != 0) return -1;
  return opened(real().__openat_2(dirfd, path, flags), flags);
}
HARMONIA_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  if (guarded([&] { return before_open(dirfd, path, flags); }) != 0) return -1;
  return opened(real().__openat64_2(dirfd, path, flags), flags);
}

HARMONIA_EXPORT int creat(const char* path, mode_t mode) {
  return open_file(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC,
                   [&](const char* target, int f) { return real().open(target, f, mode); });
}
HARMONIA_EXPORT int creat64(const char* path, mode_t mode) {
  return open_file(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC,
                   [&](const char* target, int f) { return real().open64(target, f, mode); });
}

HARMONIA_EXPORT int close(int fd) {
  if (library_keeps(fd)) {  // not the program's to close: as if that number were not open
    errno = EBADF;
    return -1;
  }
  prefetched::closing(fd);
  if (!staged(fd)) {
    const int closed = any_parked() ? close_unparking(fd) : real().close(fd);
    open_files::changed(fd);
    return closed;
  }
  const int flushed = guarded([&] { return forget(fd); });
  const int saved = errno;
  const int closed = real().close(fd);
  open_files::changed(fd);
  if (flushed != 0) {
    errno = saved;  // the data that could not be written is the error to report
    return -1;
  }
  return closed;
}

// ---- writes ------------------------------------------------------------------------------

HARMONIA_EXPORT ssize_t write(int fd, const void* buf, size_t count) {
  StagedFile* file = staged(fd);
  if (!file) return real().write(fd, buf, count);
  const struct iovec iov { const_cast<void*>(buf), count };
  return staged_write(fd, file, &iov, 1);
}

HARMONIA_EXPORT ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwrite(fd, buf, count, offset);
  const struct iovec iov { const_cast<void*>(buf), count };
  return staged_pwrite(fd, file, &iov, 1, offset);
}

HARMONIA_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwrite64(fd, buf, count, offset);
  const struct iovec iov { const_cast<void*>(buf), count };
  return staged_pwrite(fd, file, &iov, 1, offset);
}

HARMONIA_EXPORT ssize_t writev(int fd, const struct iovec* iov, int count) {
  StagedFile* file = staged(fd);
  if (!file) return real().writev(fd, iov, count);
  return staged_write(fd, file, iov, count);
}

HARMONIA_EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwritev(fd, iov, count, offset);
  return staged_pwrite(fd, file, iov, count, offset);
}

HARMONIA_EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int count, off64_t offset) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwritev64(fd, iov, count, offset);
  return staged_pwrite(fd, file, iov, count, offset);
}

/// pwritev2 with flags (RWF_APPEND, RWF_DSYNC, ...) asks for file-system semantics: flush first
/// and let the real call do it. Offset -1 means "at the current position".
static ssize_t staged_pwritev2(StagedFile* file, int fd, const struct iovec* iov, int count,
                               off64_t offset, int flags) {
  if (!valid_iov_count(count)) return -1;
  if (flags != 0)
    return flushed_then(file, [&] { return real().pwritev64v2(fd, iov, count, offset, flags); });
  return offset == -1 ? staged_write(fd, file, iov, count)
                      : staged_pwrite(fd, file, iov, count, offset);
}

HARMONIA_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int count, off_t offset,
                                 int flags) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwritev2(fd, iov, count, offset, flags);
  return staged_pwritev2(file, fd, iov, count, offset, flags);
}

HARMONIA_EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int count, off64_t offset,
                                    int flags) {
  StagedFile* file = staged(fd);
  if (!file) return real().pwritev64v2(fd, iov, count, offset, flags);
  return staged_pwritev2(file, fd, iov, count, offset, flags);
}

// ---- reads see every earlier write: from the buffer nodes that hold it, else flushed first --
// A descriptor that is not staged may read a prefetched file from the nodes (prefetched.hpp).

HARMONIA_EXPORT ssize_t read(int fd, void* buf, size_t count) {
  StagedFile* file = staged(fd);
  const iovec one{buf, count};
  if (!file)
    return prefetched::read_or(fd, &one, 1, 0, true, [&] { return real().read(fd, buf, count); });
  return held_or_flushed_then(file, &one, 1, -1, [&] { return real().read(fd, buf, count); });
}

HARMONIA_EXPORT ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  StagedFile* file = staged(fd);
  if (!file) {
    const iovec one{buf, count};
    return prefetched::read_or(fd, &one, 1, offset, false,
                               [&] { return real().pread(fd, buf, count, offset); });
  }
  if (offset < 0) return flushed_then(file, [&] { return real().pread(fd, buf, count, offset); });
  const iovec one{buf, count};
  return held_or_flushed_then(file, &one, 1, offset,
                              [&] { return real().pread(fd, buf, count, offset); });
}

HARMONIA_EXPORT ssize_t pread64(int fd, void* buf, size_t count, off64_t offset) {
  StagedFile* file = staged(fd);
  if (!file) {
    const iovec one{buf, count};
    return prefetched::read_or(fd, &one, 1, offset, false,
                               [&] { return real().pread64(fd, buf, count, offset); });
  }
  if (offset < 0) return flushed_then(file, [&] { return real().pread64(fd, buf, count, offset); });
  const iovec one{buf, count};
  return held_or_flushed_then(file, &one, 1, offset,
                              [&] { return real().pread64(fd, buf, count, offset); });
}

HARMONIA_EXPORT ssize_t readv(int fd, const struct iovec* iov, int count) {
  StagedFile* file = staged(fd);
  if (!file)
    return prefetched::read_or(fd, iov, count, 0, true,
                               [&] { return real().readv(fd, iov, count); });
  if (!valid_iov_count(count))
    return flushed_then(file, [&] { return real().readv(fd, iov, count); });
  return held_or_flushed_then(file, iov, count, -1, [&] { return real().readv(fd, iov, count); });
}

HARMONIA_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int count, off_t offset) {
  StagedFile* file = staged(fd);
  if (!file)
    return prefetched::read_or(fd, iov, count, offset, false,
                               [&] { return real().preadv(fd, iov, count, offset); });
  if (!valid_iov_count(count) || offset < 0)
    return flushed_then(file, [&] { return real().preadv(fd, iov, count, offset); });
  return held_or_flushed_then(file, iov, count, offset,
                              [&] { return real().preadv(fd, iov, count, offset); });
}

HARMONIA_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int count, off64_t offset) {
  StagedFile* file = staged(fd);
  if (!file)
    return prefetched::read_or(fd, iov, count, offset, false,
                               [&] { return real().preadv64(fd, iov, count, offset); });
  if (!valid_iov_count(count) || offset < 0)
    return flushed_then(file, [&] { return real().preadv64(fd, iov, count, offset); });
  return held_or_flushed_then(file, iov, count, offset,
                              [&] { return real().preadv64(fd, iov, count, offset); });
}

/// preadv2 with flags (RWF_NOWAIT, RWF_HIPRI, ...) asks for file-system semantics: settle first
/// and let the real call do it. Offset -1 means "at the current position".
template <class Offset>
static ssize_t staged_preadv2(StagedFile* file, int fd, const struct iovec* iov, int count,
                              Offset offset, int flags) {
  const auto call = [&] { return real().preadv64v2(fd, iov, count, offset, flags); };
  if (flags != 0 || !valid_iov_count(count) || offset < -1) return flushed_then(file, call);
  return held_or_flushed_then(file, iov, count, offset, call);
}

HARMONIA_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int count, off_t offset,
                                int flags) {
  StagedFile* file = staged(fd);
  const auto call = [&] { return real().preadv2(fd, iov, count, offset, flags); };
  if (file) return staged_preadv2(file, fd, iov, count, offset, flags);
  if (flags != 0) return call();
  return prefetched::read_or(fd, iov, count, offset, offset == -1, call);
}

HARMONIA_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int count, off64_t offset,
                                   int flags) {
  StagedFile* file = staged(fd);
  const auto call = [&] { return real().preadv64v2(fd, iov, count, offset, flags); };
  if (file) return staged_preadv2(file, fd, iov, count, offset, flags);
  if (flags != 0) return call();
  return prefetched::read_or(fd, iov, count, offset, offset == -1, call);
}

// ---- position, size, durability ----------------------------------------------------------

HARMONIA_EXPORT off_t lseek(int fd, off_t offset, int whence) {
  StagedFile* file = staged(fd);
  if (!file) return real().lseek(fd, offset, whence);
  return staged_or_plain(
      file, [&]() -> off_t { return file->seek(offset, whence); },
      [&] { return real().lseek(fd, offset, whence); });
}

HARMONIA_EXPORT off64_t lseek64(int fd, off64_t offset, int whence) {
  StagedFile* file = staged(fd);
  if (!file) return real().lseek64(fd, offset, whence);
  return staged_or_plain(
      file, [&]() -> off64_t { return file->seek(offset, whence); },
      [&] { return real().lseek64(fd, offset, whence); });
}

/// ftruncate: flush, truncate, and take the new size as the logical size.
template <class Offset, class Truncate>
static int staged_truncate(StagedFile* file, Offset length, Truncate truncate) {
  return guarded([&] {
    std::lock_guard lock(file->mutex);
    if (file->settle() != 0) return -1;
    const int result = truncate();
    if (result == 0) file->truncated(length);
    return result;
  });
}

HARMONIA_EXPORT int ftruncate(int fd, off_t length) {
  StagedFile* file = staged(fd);
  if (!file) return real().ftruncate(fd, length);
  return staged_truncate(file, length, [&] { return real().ftruncate(fd, length); });
}

HARMONIA_EXPORT int ftruncate64(int fd, off64_t length) {
  StagedFile* file = staged(fd);
  if (!file) return real().ftruncate64(fd, length);
  return staged_truncate(file, length, [&] { return real().ftruncate64(fd, length); });
}

HARMONIA_EXPORT int fsync(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return real().fsync(fd);
  return flushed_then(file, [&] { return real().fsync(fd); });
}

HARMONIA_EXPORT int fdatasync(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return real().fdatasync(fd);
  return flushed_then(file, [&] { return real().fdatasync(fd); });
}

/// fstat shows the file as the program wrote it: its size and the time of its last write, even
/// while the bytes are staged (no flush).
template <class Stat, class Call>
static int staged_fstat(StagedFile* file, Stat* st, Call call) {
  const int result = call();
  if (result == 0)
    guarded([&] {
      std::lock_guard lock(file->mutex);
      file->overlay(*st);
      return 0;
    });
  return result;
}

HARMONIA_EXPORT int fstat(int fd, struct stat* st) {
  StagedFile* file = staged(fd);
  if (!file) return real().fstat(fd, st);
  return staged_fstat(file, st, [&] { return real().fstat(fd, st); });
}

HARMONIA_EXPORT int fstat64(int fd, struct stat64* st) {
  StagedFile* file = staged(fd);
  if (!file) return real().fstat64(fd, st);
  return staged_fstat(file, st, [&] { return real().fstat64(fd, st); });
}

// ---- descriptors -------------------------------------------------------------------------

HARMONIA_EXPORT int dup(int fd) { return flushed_dup(fd, real().dup(fd)); }

HARMONIA_EXPORT int dup2(int fd, int new_fd) {
  if (fd != new_fd && staged(new_fd)) guarded([&] { return forget(new_fd); });
  return flushed_dup(fd, real().dup2(fd, new_fd));
}

HARMONIA_EXPORT int dup3(int fd, int new_fd, int flags) {
  if (fd != new_fd && staged(new_fd)) guarded([&] { return forget(new_fd); });
  return flushed_dup(fd, real().dup3(fd, new_fd, flags));
}

/// fcntl and fcntl64 (what programs built with 64-bit offsets call): `call` is the real one.
template <class Real>
static int any_fcntl(int fd, int cmd, void* arg, Real call) {
  const bool duplicates = cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
  if (duplicates && !staged(fd) && prefetched::reader(fd))
    return flushed_dup(fd, call(fd, cmd, arg));
  if (staged(fd)) {
    if (duplicates) return flushed_dup(fd, call(fd, cmd, arg));
    if (cmd == F_SETFL) {
      // A change of O_APPEND (or O_DIRECT) changes where writes go: stop staging first.
      if (guarded([&] { return unstage(fd); }) != 0) return -1;
    }
  }
  return call(fd, cmd, arg);
}

HARMONIA_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // int and pointer arguments both travel in a register
  va_end(ap);
  return any_fcntl(fd, cmd, arg, real().fcntl);
}

HARMONIA_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return any_fcntl(fd, cmd, arg, real().fcntl64);
}

// ---- process lifetime: staged data reaches its file exactly once -------------------------

namespace {

/// The process the library's memory belongs to: the one that loaded it, then each fork child
/// (pthread_atfork). A process that runs in that memory without being its owner (a child made
/// with clone(CLONE_VM), as glibc's posix_spawn makes, or with a vfork the library did not see)
/// has another pid: the staged files, buffer-node connections and agent are its parent's, so
/// the exec and exit wrappers leave them alone there and make only the real call.
std::atomic<pid_t> owner_pid{0};

void owned_by_fork_child() { owner_pid.store(getpid(), std::memory_order_relaxed); }

bool in_borrowed_memory() {
  const pid_t owner = owner_pid.load(std::memory_order_relaxed);
  const pid_t self = getpid();
  if (owner == 0 || owner == self) return false;
  // Another pid in a copy of the owner's memory (a child of a raw clone or of _Fork, which run
  // no pthread_atfork handler) owns that copy: the kernel tells which (kcmp; an owner that has
  // exited shares nothing any more). Where it cannot tell, the careful answer: shared.
  const int program_errno = errno;
  const long same = syscall(SYS_kcmp, self, owner, KCMP_VM, 0, 0);
  const bool shared = same == 0 || (same < 0 && errno != ESRCH);
  errno = program_errno;
  if (!shared) owner_pid.store(self, std::memory_order_relaxed);
  return shared;
}

/// Before a new process is made or this one becomes another program: parent and child would
/// both hold (and flush) the same staged data, share the file offsets, and the child reads the
/// files as they are on disk, so every staged file is written out and stops being staged.
void before_new_process() {
  if (!in_borrowed_memory()) guarded([] { return unstage_all(false); });
}

/// The process ends: write everything out, then leave the scheduler daemon.
int finish_process() {
  if (in_borrowed_memory()) return 0;
  const int result = unstage_all(true);
  agent::shutdown();
  return result;
}

/// After an exec or spawn of `file` was refused as open for writing (ETXTBSY): whether the
/// buffer nodes drained the program (a node keeps a file it holds bytes of open for writing
/// until it drains it), so that the call is worth making again. `along_path`: `file` is named
/// as execvp names it, and one without a slash is looked for along PATH, where a program beneath
/// the buffer root is rare, and left.
bool drained_for_exec(const char* file, bool along_path) {
  return file && (!along_path || std::strchr(file, '/')) && settle_program(file);
}

/// Runs `exec` (an exec call: it returns only when it failed, -1 with errno), and once more if
/// the kernel refused the program as open for writing and the nodes drained it. Only then, since
/// a child of a threaded program should do little before its exec.
template <class Exec>
int exec_once_drained(const char* file, bool along_path, Exec exec) {
  const int result = exec();
  if (result != 0 && errno == ETXTBSY && !in_borrowed_memory() &&
      drained_for_exec(file, along_path))
    return exec();
  return result;
}

/// The same for posix_spawn, which returns the error instead, in the parent.
template <class Spawn>
int spawn_once_drained(const char* file, bool along_path, Spawn spawn) {
  const int error = spawn();
  if (error == ETXTBSY && drained_for_exec(file, along_path)) return spawn();
  return error;
}

pid_t library_fork() {
  before_new_process();
  const pid_t pid = real().fork();
  if (pid == 0) prefetched::forked();
  return pid;
}

}  // namespace

HARMONIA_EXPORT pid_t fork(void) { return library_fork(); }

/// vfork is the library's fork (POSIX lets vfork be fork): a vfork child would run the exec and
/// exit wrappers in its parent's memory, unstaging the parent's files and opening buffer-node
/// connections whose descriptors only the child has. A wrapper cannot call the real vfork: its
/// child would return through the wrapper's frame, which the parent then reuses.
HARMONIA_EXPORT pid_t vfork(void) { return library_fork(); }

HARMONIA_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  before_new_process();
  return exec_once_drained(path, /*along_path=*/false,
                           [&] { return real().execve(path, argv, envp); });
}

HARMONIA_EXPORT int execv(const char* path, char* const argv[]) {
  before_new_process();
  return exec_once_drained(path, /*along_path=*/false, [&] { return real().execv(path, argv); });
}

HARMONIA_EXPORT int execvp(const char* file, char* const argv[]) {
  before_new_process();
  return exec_once_drained(file, /*along_path=*/true, [&] { return real().execvp(file, argv); });
}

HARMONIA_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  before_new_process();
  return exec_once_drained(file, /*along_path=*/true,
                           [&] { return real().execvpe(file, argv, envp); });
}

HARMONIA_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  before_new_process();
  return real().fexecve(fd, argv, envp);
}

// glibc starts these children with clone(CLONE_VM | CLONE_VFORK) and execs them with its
// internal call, which no wrapper sees: what fork does first is done before.

HARMONIA_EXPORT int posix_spawn(pid_t* pid, const char* path,
                                const posix_spawn_file_actions_t* actions,
                                const posix_spawnattr_t* attributes, char* const argv[],
                                char* const envp[]) {
  before_new_process();
  return spawn_once_drained(path, /*along_path=*/false, [&] {
    return real().posix_spawn(pid, path, actions, attributes, argv, envp);
  });
}

HARMONIA_EXPORT int posix_spawnp(pid_t* pid, const char* file,
                                 const posix_spawn_file_actions_t* actions,
                                 const posix_spawnattr_t* attributes, char* const argv[],
                                 char* const envp[]) {
  before_new_process();
  return spawn_once_drained(file, /*along_path=*/true, [&] {
    return real().posix_spawnp(pid, file, actions, attributes, argv, envp);
  });
}

HARMONIA_EXPORT int system(const char* command) {
  if (command) before_new_process();  // system(NULL) only asks whether a shell exists
  return real().system(command);
}

HARMONIA_EXPORT FILE* popen(const char* command, const char* mode) {
  before_new_process();
  return real().popen(command, mode);
}

/// The execl family takes its arguments as varargs; collect them and go through execve/execvp.
static std::vector<char*> collect_args(const char* first, va_list ap) {
  std::vector<char*> args{const_cast<char*>(first)};
  while (args.back() != nullptr) args.push_back(va_arg(ap, char*));
  return args;
}

HARMONIA_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  auto args = collect_args(arg, ap);
  va_end(ap);
  return execve(path, args.data(), environ);
}

HARMONIA_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  auto args = collect_args(arg, ap);
  va_end(ap);
  return execvp(file, args.data());
}

HARMONIA_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  auto args = collect_args(arg, ap);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, args.data(), envp);
}

HARMONIA_EXPORT void _exit(int status) {
  guarded(finish_process);
  real()._exit(status);
  __builtin_unreachable();
}

HARMONIA_EXPORT void _Exit(int status) {
  guarded(finish_process);
  real()._Exit(status);
  __builtin_unreachable();
}

/// exit() and the end of main: the streams' buffers first (glibc would flush them only after
/// the destructors, when their files are no longer staged), then everything out.
__attribute__((destructor)) static void finalize_at_exit() {
  if (in_borrowed_memory()) return;
  guarded([] {
    flush_streams_at_exit();
    return finish_process();
  });
}

/// Loaded: the memory is this process's (and each fork child's); a program that announces a
/// read phase registers at once (agent::start_for_prefetch).
__attribute__((constructor)) static void announce_at_start() {
  owner_pid.store(getpid(), std::memory_order_relaxed);
  pthread_atfork(nullptr, nullptr, owned_by_fork_child);
  guarded([] {
    agent::start_for_prefetch();
    return 0;
  });
}
