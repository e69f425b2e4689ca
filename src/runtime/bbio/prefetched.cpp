#include "runtime/bbio/prefetched.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/registry.hpp"
#include "runtime/bbio/report.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio::prefetched {

using storage::real;

/// One descriptor of a prefetched file. Allocated once per descriptor number and kept: a thread
/// racing a close may still hold it.
struct Reader {
  /// Guards the fields below, and is held through a served read(): no other served read of the
  /// descriptor moves the offset in between.
  std::mutex mutex;
  std::atomic<bool> active{false};
  std::atomic<bool> plain{true};  ///< every call goes to the file system
  size_t index = 0;               ///< in environment().prefetch
  std::shared_ptr<const agent::ReadGrant> grant;
  buffers::FileIdentity identity;  ///< as fstat saw the file at the open
  dev_t device = 0;
};

namespace {

constexpr int kMaxFd = 1 << 16;  // descriptors above this are never served
/// Larger reads go to the file system: their bytes would pass through one buffer here.
constexpr size_t kMaxServed = 64 << 20;

struct Table {
  std::atomic<Reader*> slots[kMaxFd] = {};
  /// Prefetched files this process opened for writing: their reads are plain from then on.
  std::atomic<bool> written[Environment::kMaxPrefetch] = {};
  std::mutex mutex;  ///< guards `open` and the activation of readers
  size_t open = 0;   ///< descriptors of prefetched files, read-only or duplicated
};

std::atomic<Table*> table{nullptr};

/// The table, made on first use without a lock (a forked child may make its own while another
/// thread of its parent held any lock).
Table& the_table() {
  Table* t = table.load(std::memory_order_acquire);
  if (t) return *t;
  auto* made = new Table();  // never destroyed: wrappers run until the very end of the process
  if (!table.compare_exchange_strong(t, made, std::memory_order_acq_rel)) {
    delete made;
    return *t;
  }
  tracking.store(true, std::memory_order_release);
  return *made;
}

buffers::FileIdentity identity_of(const struct stat64& st) {
  const auto ns = [](const timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  return {static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim),
          static_cast<std::uint64_t>(st.st_ino)};
}

/// The index in environment().prefetch of the file `fd` is open on, or -1.
int prefetch_index(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return -1;
  const std::string path(target, static_cast<size_t>(n));
  const auto& files = environment().prefetch;
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].path == path) return static_cast<int>(i);
  return -1;
}

/// Stops tracking `fd` (t.mutex held); true when it was tracked.
bool deactivate(Table& t, int fd) {
  Reader* r = fd >= 0 && fd < kMaxFd ? t.slots[fd].load(std::memory_order_acquire) : nullptr;
  if (!r) return false;
  std::lock_guard lock(r->mutex);
  if (!r->active.load()) return false;
  r->active = false;
  r->plain = true;
  r->grant.reset();
  return true;
}

/// After a tracked descriptor went: the read phase ends a gap after the last one (t.mutex held).
void went(Table& t) {
  if (t.open > 0) --t.open;
  if (t.open == 0) agent::read_idle();
}

/// Tracks `fd` (t.mutex held).
Reader& activate(Table& t, int fd) {
  Reader* r = t.slots[fd].load(std::memory_order_acquire);
  if (!r) {
    r = new Reader();  // kept for the descriptor number's next use
    t.slots[fd].store(r, std::memory_order_release);
  }
  ++t.open;
  return *r;
}

}  // namespace

std::atomic<bool> tracking{false};

Reader* lookup(int fd) noexcept {
  Table* t = table.load(std::memory_order_acquire);
  if (!t || fd < 0 || fd >= kMaxFd) return nullptr;
  Reader* r = t->slots[fd].load(std::memory_order_acquire);
  return r && r->active.load(std::memory_order_acquire) ? r : nullptr;
}

void opened(int fd, int flags) noexcept {
  const int saved = errno;
  try {
    if (!agent::configured() || environment().prefetch.empty() || fd < 0 || fd >= kMaxFd) return;
    // A descriptor number closed behind our back (a raw syscall) and reused.
    forget(fd);
    struct stat64 st {};
    if ((flags & O_PATH) || real().fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      errno = saved;
      return;
    }
    const int index = prefetch_index(fd);
    if (index < 0) {
      errno = saved;
      return;
    }
    Table& t = the_table();
    if ((flags & O_ACCMODE) != O_RDONLY) {
      // This process writes the file: what the nodes copied may not be what it reads any more.
      t.written[index].store(true);
      errno = saved;
      return;
    }
    std::lock_guard lock(t.mutex);
    if (t.open == 0) (void)agent::begin_read_phase();
    Reader& r = activate(t, fd);
    std::lock_guard reader_lock(r.mutex);
    r.index = static_cast<size_t>(index);
    r.grant = agent::read_grant();
    r.identity = identity_of(st);
    r.device = st.st_dev;
    const std::string& name = environment().prefetch[r.index].name;
    // Served only while nothing of this process's own may differ from the copies: no O_DIRECT
    // (its alignment rules are the file system's), nothing written or staged here.
    r.plain = !r.grant->serves(name) || (flags & O_DIRECT) || t.written[index].load() ||
              buffers::wrote(st.st_ino) || staged_inode(st.st_dev, st.st_ino) != nullptr;
    r.active = true;
  } catch (...) {
    // Not tracked: its reads are plain.
  }
  errno = saved;
}

void forget(int fd) noexcept {
  Table* t = table.load(std::memory_order_acquire);
  // Without the lock first: an open waiting for its grant holds it, and other descriptors'
  // opens and closes must not wait for that.
  if (!t || !lookup(fd)) return;
  const int saved = errno;
  try {
    std::lock_guard lock(t->mutex);
    if (deactivate(*t, fd)) went(*t);
  } catch (...) {
    // agent::read_idle could not take its lock's memory: the exit ends the phase.
  }
  errno = saved;
}

void closing_range(unsigned first, unsigned last) noexcept {
  if (!tracking.load(std::memory_order_relaxed)) return;
  for (unsigned fd = first; fd <= last && fd < static_cast<unsigned>(kMaxFd); ++fd)
    forget(static_cast<int>(fd));
}

void duplicated(int fd, int new_fd) noexcept {
  if (!tracking.load(std::memory_order_relaxed) || fd == new_fd || new_fd < 0) return;
  Table* t = table.load(std::memory_order_acquire);
  if (!t) return;
  const int saved = errno;
  try {
    forget(new_fd);
    Reader* from = lookup(fd);
    if (!from || new_fd >= kMaxFd) {
      errno = saved;
      return;
    }
    std::lock_guard lock(t->mutex);
    size_t index;
    {
      std::lock_guard from_lock(from->mutex);
      index = from->index;
    }
    Reader& r = activate(*t, new_fd);
    std::lock_guard reader_lock(r.mutex);
    r.index = index;
    r.plain = true;  // it shares the offset with `fd`: reads through it stay plain
    r.active = true;
  } catch (...) {
  }
  errno = saved;
}

void forked() noexcept {
  // The parent's table (and its locks, which another thread may hold) stays behind, unused.
  tracking.store(false, std::memory_order_relaxed);
  table.store(nullptr, std::memory_order_relaxed);
}

ssize_t serve(Reader* reader, int fd, const struct iovec* iov, int count, off64_t offset,
              bool at_position) noexcept {
  const int saved = errno;
  Reader& r = *reader;
  // With HARMONIA_DEBUG=1 each descriptor that goes back to the PFS says why, once.
  const auto plain_from_now = [&](const char* why) {
    r.plain = true;
    if (environment().config.debug)
      report(environment().prefetch[r.index].name + " (descriptor " + std::to_string(fd) +
             "): read from the PFS from now on: " + why);
    errno = saved;
    return kNotServed;
  };
  try {
    if (r.plain.load(std::memory_order_relaxed)) return kNotServed;
    if (count <= 0 || count > IOV_MAX || (!at_position && offset < 0)) return kNotServed;
    size_t total = 0;
    for (int i = 0; i < count; ++i) {
      if (iov[i].iov_len > kMaxServed - total) return kNotServed;  // too large to serve
      total += iov[i].iov_len;
    }
    if (total == 0) return kNotServed;
    std::unique_lock lock(r.mutex);
    if (!r.active || r.plain) return kNotServed;
    Table* t = table.load(std::memory_order_acquire);
    const std::string& name = environment().prefetch[r.index].name;
    // The directive changed (other nodes, other files, the daemon gone), or the file is this
    // process's own now: the copies may not be what the file holds.
    if (!t || r.grant->version != agent::read_grant_version() || t->written[r.index].load() ||
        buffers::wrote(r.identity.inode) || staged_inode(r.device, r.identity.inode))
      return plain_from_now("the read grant changed, or this process wrote the file");
    struct stat64 st {};
    if (real().fstat64(fd, &st) != 0 || st.st_dev != r.device || !S_ISREG(st.st_mode))
      return plain_from_now("fstat failed or shows another file");
    const buffers::FileIdentity now = identity_of(st);
    if (!(now == r.identity)) return plain_from_now("the file changed since it was opened");
    const off64_t at = at_position ? real().lseek64(fd, 0, SEEK_CUR) : offset;
    // At or past the end the file system answers (0 bytes), as it does for an empty read.
    if (at < 0 || static_cast<std::uint64_t>(at) >= now.size) {
      errno = saved;
      return kNotServed;
    }
    const size_t length = static_cast<size_t>(
        std::min<std::uint64_t>(total, now.size - static_cast<std::uint64_t>(at)));
    const std::shared_ptr<const agent::ReadGrant> grant = r.grant;
    if (!at_position) lock.unlock();  // pread leaves the offset alone: reads may overlap
    std::string data;
    if (!buffers::read({name, now.inode, {}}, at, length, grant->nodes, grant->stripe, data,
                       &now) ||
        data.size() != length)
      return plain_from_now("a buffer node did not serve the range");
    if (at_position && real().lseek64(fd, at + static_cast<off64_t>(length), SEEK_SET) < 0)
      return plain_from_now("lseek failed");
    size_t done = 0;
    for (int i = 0; i < count && done < length; ++i) {
      const size_t take = std::min(iov[i].iov_len, length - done);
      std::memcpy(iov[i].iov_base, data.data() + done, take);
      done += take;
    }
    errno = saved;
    return static_cast<ssize_t>(length);
  } catch (...) {
    r.plain = true;  // nothing that allocates here: this is noexcept
    errno = saved;
    return kNotServed;
  }
}

}  // namespace harmonia::bbio::prefetched
