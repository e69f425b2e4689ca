#pragma once
// Prefetched reads (HARMONIA_PREFETCH; docs/staging-library.md, "Prefetched reads"): the read
// phase of the files a job announced, and its reads served from the buffer nodes that staged the
// files in. A descriptor opened read-only on a prefetched file begins the process's read phase
// (waiting for its grant), and its last close ends it. Its read, pread, readv and preadv (and
// their 64 forms) go to the nodes while the grant lists the file; the file offset moves as the
// file system's read would move it. Any doubt sends the descriptor to plain I/O for good.
//
// Until the process opens a prefetched file, every call here costs one relaxed atomic load.

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>

namespace harmonia::bbio::prefetched {

struct Reader;

/// Set once this process tracks a descriptor of a prefetched file.
extern std::atomic<bool> tracking;
Reader* lookup(int fd) noexcept;

/// The reader behind `fd`, or nullptr (one relaxed load for a process tracking nothing).
inline Reader* reader(int fd) noexcept {
  return tracking.load(std::memory_order_relaxed) ? lookup(fd) : nullptr;
}

/// What serve() returns when the call must go to the file system.
constexpr ssize_t kNotServed = -2;
/// Serves a read of `iov` (`count` pieces) at `offset`, or at the file offset (which then
/// advances) when `at_position`, from the buffer nodes; kNotServed when it must not.
ssize_t serve(Reader* reader, int fd, const struct iovec* iov, int count, off64_t offset,
              bool at_position) noexcept;

/// The read of `iov` served from the nodes when `fd` is a served descriptor, else `call()`.
template <class Call>
ssize_t read_or(int fd, const struct iovec* iov, int count, off64_t offset, bool at_position,
                Call call) {
  if (Reader* r = reader(fd))
    if (const ssize_t n = serve(r, fd, iov, count, offset, at_position); n != kNotServed) return n;
  return call();
}

/// After a real open returned `fd` with open(2) `flags`: a read-only descriptor of a prefetched
/// file is tracked (and may begin the read phase, waiting for its grant); a writing one sends the
/// file's readers in this process to plain I/O.
void opened(int fd, int flags) noexcept;
void forget(int fd) noexcept;
/// Before `fd` is closed: its last descriptor of the prefetched files ends the read phase.
inline void closing(int fd) noexcept {
  if (tracking.load(std::memory_order_relaxed)) forget(fd);
}
/// closing() for [first, last] (close_range, closefrom).
void closing_range(unsigned first, unsigned last) noexcept;
/// `new_fd` now refers to `fd`'s open file (dup family): it counts in the read phase, its reads
/// are plain; whatever `new_fd` was before is closed.
void duplicated(int fd, int new_fd) noexcept;
/// In a forked child: it tracks nothing of its parent's (its own agent begins its own phases).
void forked() noexcept;

}  // namespace harmonia::bbio::prefetched
