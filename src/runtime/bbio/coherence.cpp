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

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/open_files.hpp"
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

/// `find()`, or nullptr if it threw (the call then runs as it would without the library). A
/// lookup leaves the program's errno as it was: the call that follows may succeed without
/// setting it.
template <class Find>
StagedFile* found(Find find) noexcept {
  const int program_errno = errno;
  StagedFile* file = nullptr;
  try {
    file = find();
  } catch (...) {
  }
  errno = program_errno;
  return file;
}

/// Runs `call` once the file behind `fd`, if staged, is settled (the data calls: copies,
/// allocation).
template <class Call>
auto fd_settled(int fd, Call call) -> decltype(call()) {
  StagedFile* file = found([&] { return staged_behind(fd); });
  return file ? flushed_then(file, call) : call();
}

/// Whether other processes and the buffer nodes have written out what they hold of the regular
/// file `path` (relative to `dirfd`; "" with AT_EMPTY_PATH: the file `dirfd` is open on): true also
/// when there is no scheduler daemon or the file is not one to settle; false, with EIO, when bytes
/// of it stayed on a node that is down.
bool settled_elsewhere(int dirfd, const char* path, int at_flags) {
  if (!agent::configured()) return true;
  return guarded([&] {
           // The kernel checks the path (EFAULT for a bad pointer): nothing here reads it first.
           struct stat64 st {};
           if (!path ||
               real().fstatat64(dirfd, path, &st,
                                at_flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) != 0 ||
               !S_ISREG(st.st_mode))
             return 0;
           return settle_elsewhere(dirfd, path, st);
         }) == 0;
}

/// Runs `call`, a change of the file's times, mode or owner through `fd`, once the file is
/// settled everywhere: what other processes wrote and the nodes hold lands first (their drain
/// would otherwise set the time over the program's), then what is staged here. -1 with EIO, and
/// no call, when bytes of it stayed on a node that is down.
template <class Call>
auto metadata_settled(int fd, Call call) -> decltype(call()) {
  if (!settled_elsewhere(fd, "", AT_EMPTY_PATH)) return -1;
  return fd_settled(fd, call);
}

/// Runs `call` once the file `path` names (relative to `dirfd`) is settled: staged by other
/// processes or held by buffer nodes, written out and drained (through the scheduler daemon);
/// staged here, its bytes written. -1 with EIO, and no call, when bytes of it stayed on a node
/// that is down.
template <class Call>
auto path_settled(int dirfd, const char* path, int at_flags, Call call) -> decltype(call()) {
  if (!settled_elsewhere(dirfd, path, at_flags)) return -1;
  StagedFile* file = found([&] { return staged_path(dirfd, path, at_flags); });
  return file ? flushed_then(file, call) : call();
}

/// What the buffer nodes hold of the regular file `path` (relative to `dirfd`) with `inode`,
/// when it is beneath HARMONIA_BUFFER_ROOT and they hold any. A held file whose handle differs
/// from this one's was removed since, and this file took its inode: nothing is held of it.
std::optional<agent::HeldByNodes> held_of(int dirfd, const char* path, dev_t device, ino_t inode) {
  if (!agent::configured() || !buffers::beneath_buffer_root(dirfd, path, device))
    return std::nullopt;
  auto held = agent::held_by_nodes(inode);
  if (held && !held->handle.empty()) {
    const std::string mine = buffers::handle_at(dirfd, path);
    if (!mine.empty() && mine != held->handle) return std::nullopt;
  }
  return held;
}

/// A stat by path shows the size and times the program wrote: staged here, from the staged
/// file; held by buffer nodes (written by this or another process, closed or not), from what
/// the scheduler daemon knows of them. Both, for a file staged here that other processes write
/// too.
template <class Stat>
void overlay_written(int dirfd, const char* path, Stat& st) {
  guarded([&] {
    if (StagedFile* file = any_staged() ? staged_inode(st.st_dev, st.st_ino) : nullptr) {
      std::lock_guard lock(file->mutex);
      file->overlay(st);
    }
    if (!S_ISREG(st.st_mode)) return 0;
    if (const auto held = held_of(dirfd, path, st.st_dev, st.st_ino)) {
      st.st_size = std::max<off64_t>(st.st_size, static_cast<off64_t>(held->size));
      const timespec written{static_cast<time_t>(held->mtime_ns / 1'000'000'000),
                             static_cast<long>(held->mtime_ns % 1'000'000'000)};
      for (timespec* stamp : {&st.st_mtim, &st.st_ctim})
        if (written.tv_sec > stamp->tv_sec ||
            (written.tv_sec == stamp->tv_sec && written.tv_nsec > stamp->tv_nsec))
          *stamp = written;
    }
    return 0;
  });
}

/// The real stat call of `path` (relative to `dirfd`), then the size and times written shown
/// over it.
template <class Stat, class Call>
int overlaid(int dirfd, const char* path, Stat* st, Call call) {
  const int result = call();
  if (result == 0) overlay_written(dirfd, path, *st);
  return result;
}

int to_plain_io(int fd) {
  return fd >= 0 ? guarded([&] { return plain_io_fd(fd); }) : 0;
}

/// A mode with the set-user-ID or set-group-ID bit: the kernel clears them when an unprivileged
/// process writes the file, at each write, so such a file is not staged.
bool privileged(mode_t mode) { return (mode & (S_ISUID | S_ISGID)) != 0; }

/// Sends the staged file `path` names, if any, to plain I/O (its bytes are already settled).
void path_to_plain_io(int dirfd, const char* path, int at_flags) {
  guarded([&] {
    if (StagedFile* file = staged_path(dirfd, path, at_flags)) {
      const auto [device, inode] = file->identity();
      return plain_io(device, inode);
    }
    return 0;
  });
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
  return overlaid(AT_FDCWD, path, st, [&] { return real().stat(path, st); });
}
HARMONIA_EXPORT int stat64(const char* path, struct stat64* st) {
  return overlaid(AT_FDCWD, path, st, [&] { return real().stat64(path, st); });
}
HARMONIA_EXPORT int lstat(const char* path, struct stat* st) {
  return overlaid(AT_FDCWD, path, st, [&] { return real().lstat(path, st); });
}
HARMONIA_EXPORT int lstat64(const char* path, struct stat64* st) {
  return overlaid(AT_FDCWD, path, st, [&] { return real().lstat64(path, st); });
}
HARMONIA_EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return overlaid(dirfd, path, st, [&] { return real().fstatat(dirfd, path, st, flags); });
}
HARMONIA_EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  return overlaid(dirfd, path, st, [&] { return real().fstatat64(dirfd, path, st, flags); });
}

HARMONIA_EXPORT int statx(int dirfd, const char* path, int flags, unsigned int mask,
                          struct statx* st) {
  const int result = real().statx(dirfd, path, flags, mask, st);
  if (result != 0 || !(st->stx_mask & STATX_INO) || !(st->stx_mask & STATX_TYPE)) return result;
  guarded([&] {
    const dev_t device = makedev(st->stx_dev_major, st->stx_dev_minor);
    if (StagedFile* file = any_staged() ? staged_inode(device, st->stx_ino) : nullptr) {
      std::lock_guard lock(file->mutex);
      file->overlay(*st);
    }
    if (!S_ISREG(st->stx_mode)) return 0;
    if (const auto held = held_of(dirfd, path, device, st->stx_ino)) {
      if (st->stx_mask & STATX_SIZE)
        st->stx_size = std::max<std::uint64_t>(st->stx_size, held->size);
      const statx_timestamp written{held->mtime_ns / 1'000'000'000,
                                    static_cast<std::uint32_t>(held->mtime_ns % 1'000'000'000), 0};
      for (statx_timestamp* stamp : {&st->stx_mtime, &st->stx_ctime})
        if (written.tv_sec > stamp->tv_sec ||
            (written.tv_sec == stamp->tv_sec && written.tv_nsec > stamp->tv_nsec))
          *stamp = written;
    }
    return 0;
  });
  return result;
}

// ---- names: a staged file's log follows its renames and deletions ------------------------

namespace {

/// The staged file the name `path` (relative to `dirfd`) stands for, its last part not followed
/// (what rename and unlink act on), or nullptr.
StagedFile* staged_name(int dirfd, const char* path) {
  return found([&] { return staged_path(dirfd, path, AT_SYMLINK_NOFOLLOW); });
}

/// Whether renaming (or linking) `from`, its last part followed when `at_flags` says so, to `to`
/// takes a regular file from beneath HARMONIA_BUFFER_ROOT to a name outside it, where no
/// process under the library asks the scheduler what the nodes hold of it (a destination whose
/// directory cannot be resolved counts as outside).
bool leaves_buffer_root(int from_dir, const char* from, int to_dir, const char* to, int at_flags) {
  if (!agent::configured() || !from || !to) return false;
  const int program_errno = errno;
  struct stat64 st {};
  struct stat64 destination {};
  // The kernel reads each path before it is read here (EFAULT for a bad pointer, ENAMETOOLONG
  // for one with no end within PATH_MAX); the new name only for a file beneath the root.
  bool leaves = real().fstatat64(from_dir, from, &st, at_flags) == 0 && S_ISREG(st.st_mode) &&
                buffers::beneath_buffer_root(from_dir, from, st.st_dev) &&
                (real().fstatat64(to_dir, to, &destination, AT_SYMLINK_NOFOLLOW) == 0 ||
                 (errno != EFAULT && errno != ENAMETOOLONG));
  if (leaves) {
    const std::string name = to;
    const auto slash = name.rfind('/');
    const std::string directory =
        resolved_path(to_dir, slash == std::string::npos ? "." : name.substr(0, slash + 1).c_str());
    const std::string leaf = slash == std::string::npos ? name : name.substr(slash + 1);
    leaves = directory.empty() ||
             !buffers::beneath_buffer_root(AT_FDCWD, (directory + "/" + leaf).c_str(), st.st_dev);
  }
  errno = program_errno;
  return leaves;
}

/// Settles `from` (its last part followed when `at_flags` says so) when its new name `to` takes
/// it out from beneath the buffer root: past the root, nothing would ask for the bytes the
/// nodes hold. 0, or -1 with EIO when some stayed on a node that is down.
int settled_before_leaving(int from_dir, const char* from, int to_dir, const char* to,
                           int at_flags) {
  if (!leaves_buffer_root(from_dir, from, to_dir, to, at_flags)) return 0;
  return path_settled(from_dir, from, at_flags, [] { return 0; });
}

/// A rename by `call` of `from` to `to`: a staged file moved records its new name, one replaced
/// (its last name gone) records its deletion, and with RENAME_EXCHANGE both swap names. A file
/// moved out from beneath the buffer root is settled first.
template <class Call>
int renamed(int from_dir, const char* from, int to_dir, const char* to, unsigned int flags,
            Call call) {
  if (settled_before_leaving(from_dir, from, to_dir, to, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  if (!any_staged()) return call();
  StagedFile* source = staged_name(from_dir, from);
  StagedFile* replaced = staged_name(to_dir, to);
  const int result = call();
  if (result != 0 || (!source && !replaced)) return result;
  guarded([&] {
    if (source) {
      const std::string now = resolved_path(to_dir, to);
      std::lock_guard lock(source->mutex);
      if (!now.empty()) source->renamed(now);
    }
    if (replaced && replaced != source) {
      std::lock_guard lock(replaced->mutex);
      if (flags & RENAME_EXCHANGE) {
        const std::string now = resolved_path(from_dir, from);
        if (!now.empty()) replaced->renamed(now);
      } else if (!replaced->has_names()) {
        replaced->unlinked();
      }
    }
    return 0;
  });
  return result;
}

/// An unlink by `call` of `path`: a staged file that lost its last name records its deletion.
template <class Call>
int unlinked(int dirfd, const char* path, Call call) {
  if (!any_staged()) return call();
  StagedFile* file = staged_name(dirfd, path);
  const int result = call();
  if (result == 0 && file)
    guarded([&] {
      std::lock_guard lock(file->mutex);
      if (!file->has_names()) file->unlinked();
      return 0;
    });
  return result;
}

}  // namespace

HARMONIA_EXPORT int rename(const char* from, const char* to) {
  return renamed(AT_FDCWD, from, AT_FDCWD, to, 0, [&] { return real().rename(from, to); });
}
HARMONIA_EXPORT int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  return renamed(from_dir, from, to_dir, to, 0,
                 [&] { return real().renameat(from_dir, from, to_dir, to); });
}
HARMONIA_EXPORT int renameat2(int from_dir, const char* from, int to_dir, const char* to,
                              unsigned int flags) {
  return renamed(from_dir, from, to_dir, to, flags,
                 [&] { return real().renameat2(from_dir, from, to_dir, to, flags); });
}
/// A new name for `from`: one outside the buffer root first has the file settled.
HARMONIA_EXPORT int link(const char* from, const char* to) {
  if (settled_before_leaving(AT_FDCWD, from, AT_FDCWD, to, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  return real().link(from, to);
}
HARMONIA_EXPORT int linkat(int from_dir, const char* from, int to_dir, const char* to, int flags) {
  const int follow = flags & AT_SYMLINK_FOLLOW ? 0 : AT_SYMLINK_NOFOLLOW;
  if (settled_before_leaving(from_dir, from, to_dir, to, follow) != 0) return -1;
  return real().linkat(from_dir, from, to_dir, to, flags);
}
HARMONIA_EXPORT int unlink(const char* path) {
  return unlinked(AT_FDCWD, path, [&] { return real().unlink(path); });
}
HARMONIA_EXPORT int unlinkat(int dirfd, const char* path, int flags) {
  if (flags & AT_REMOVEDIR) return real().unlinkat(dirfd, path, flags);
  return unlinked(dirfd, path, [&] { return real().unlinkat(dirfd, path, flags); });
}

// ---- times, modes, owners: after the writes made before them ----------------------------

HARMONIA_EXPORT int futimens(int fd, const struct timespec times[2]) {
  return metadata_settled(fd, [&] { return real().futimens(fd, times); });
}
HARMONIA_EXPORT int utimensat(int dirfd, const char* path, const struct timespec times[2],
                              int flags) {
  return path_settled(dirfd, path, flags,
                      [&] { return real().utimensat(dirfd, path, times, flags); });
}
HARMONIA_EXPORT int futimes(int fd, const struct timeval times[2]) {
  return metadata_settled(fd, [&] { return real().futimes(fd, times); });
}
HARMONIA_EXPORT int utimes(const char* path, const struct timeval times[2]) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().utimes(path, times); });
}
HARMONIA_EXPORT int lutimes(const char* path, const struct timeval times[2]) {
  return path_settled(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
                      [&] { return real().lutimes(path, times); });
}
HARMONIA_EXPORT int futimesat(int dirfd, const char* path, const struct timeval times[2]) {
  if (!path) return metadata_settled(dirfd, [&] { return real().futimesat(dirfd, path, times); });
  return path_settled(dirfd, path, 0, [&] { return real().futimesat(dirfd, path, times); });
}
HARMONIA_EXPORT int utime(const char* path, const struct utimbuf* times) {
  return path_settled(AT_FDCWD, path, 0, [&] { return real().utime(path, times); });
}

HARMONIA_EXPORT int fchmod(int fd, mode_t mode) {
  const int result = metadata_settled(fd, [&] { return real().fchmod(fd, mode); });
  if (result == 0 && privileged(mode)) (void)to_plain_io(fd);
  return result;
}
HARMONIA_EXPORT int chmod(const char* path, mode_t mode) {
  const int result = path_settled(AT_FDCWD, path, 0, [&] { return real().chmod(path, mode); });
  if (result == 0 && privileged(mode)) path_to_plain_io(AT_FDCWD, path, 0);
  return result;
}
HARMONIA_EXPORT int fchmodat(int dirfd, const char* path, mode_t mode, int flags) {
  const int result =
      path_settled(dirfd, path, flags, [&] { return real().fchmodat(dirfd, path, mode, flags); });
  if (result == 0 && privileged(mode)) path_to_plain_io(dirfd, path, flags);
  return result;
}
HARMONIA_EXPORT int fchown(int fd, uid_t owner, gid_t group) {
  return metadata_settled(fd, [&] { return real().fchown(fd, owner, group); });
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

/// close_range(first, last, flags) around the descriptors the library keeps.
static int close_range_around_kept(unsigned first, unsigned last, int flags) {
  if (first > last) return real().close_range(first, last, flags);  // EINVAL, as the kernel says
  int result = 0;
  unsigned from = first;
  for (const int kept : kept_between(first, last)) {
    const auto number = static_cast<unsigned>(kept);
    if (number > from && real().close_range(from, number - 1, flags) != 0) result = -1;
    from = number + 1;
    if (number == last) return result;
  }
  if (real().close_range(from, last, flags) != 0) result = -1;
  return result;
}

HARMONIA_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  // With CLOSE_RANGE_CLOEXEC nothing closes now; exec flushes everything first.
  if (!(flags & CLOSE_RANGE_CLOEXEC)) prefetched::closing_range(first, last);
  const int flushed =
      (flags & CLOSE_RANGE_CLOEXEC) ? 0 : guarded([&] { return forget_range(first, last); });
  const int saved = errno;
  const int closed = close_range_around_kept(first, last, flags);
  if (!(flags & CLOSE_RANGE_CLOEXEC)) open_files::changed_range(first, last);
  if (flushed != 0) {
    errno = saved;
    return -1;
  }
  return closed;
}
HARMONIA_EXPORT void closefrom(int first) {
  if (first >= 0) prefetched::closing_range(static_cast<unsigned>(first), ~0U);
  if (first >= 0) guarded([&] { return forget_range(static_cast<unsigned>(first), ~0U); });
  if (first < 0 || kept_between(static_cast<unsigned>(first), ~0U).empty())
    real().closefrom(first);
  else
    (void)close_range_around_kept(static_cast<unsigned>(first), ~0U, 0);
  if (first >= 0) open_files::changed_range(static_cast<unsigned>(first), ~0U);
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
