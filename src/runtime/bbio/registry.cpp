#include "runtime/bbio/registry.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/open_files.hpp"
#include "runtime/bbio/phases.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio {

using storage::real;

namespace {

constexpr int kMaxFd = 1 << 16;  // descriptors above this are never staged

struct State {
  std::mutex mutex;  // guards everything below but `slots`
  Config config;
  bool final = false;
  std::vector<std::unique_ptr<StagedFile>> files;
  std::atomic<size_t> live{0};       ///< files.size(), readable without the lock
  std::atomic<double> node_wait{0};  ///< config.node_wait, readable without the lock
  /// `files` again, under a lock of its own that is never held across a flush: what a settle
  /// order looks up while a flush waiting for its turn holds `mutex`.
  std::mutex index_mutex;
  std::vector<StagedFile*> index;
  /// Files sent to plain I/O (mapped, opened twice, asynchronous I/O): never staged again.
  std::set<std::pair<dev_t, ino_t>> plain;
  /// Our descriptors of files that left staging while the program kept them open, closed when
  /// the program closes one of its descriptors of the file (closing ours earlier would drop the
  /// program's POSIX locks on it).
  std::multimap<std::pair<dev_t, ino_t>, int> parked;
  std::atomic<size_t> parked_count{0};  ///< parked.size(), readable without the lock
  // Released files stay allocated: a thread racing a close may still hold the pointer.
  std::vector<std::unique_ptr<StagedFile>> retired;
  std::atomic<StagedFile*> slots[kMaxFd] = {};
};

std::atomic<State*> state_ptr{nullptr};
pthread_once_t state_once = PTHREAD_ONCE_INIT;

void make_state() {
  // Never destroyed: wrappers may run during and after static destruction.
  auto* s = new State();
  s->config = environment().config;
  s->node_wait = s->config.node_wait;
  state_ptr.store(s, std::memory_order_release);
  // The agent, below, reaches the staged files only through these.
  agent::set_file_layer({staged_total, settle_for_reader, flush_all});
  if (const std::string& trace = s->config.phase_trace; !trace.empty()) {
    const int fd = real().open(trace.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      report("HARMONIA_PHASE_TRACE=" + trace + ": cannot open it for appending (" +
             std::strerror(errno) + "); phases are not traced");
      s->config.phase_trace.clear();
    } else {
      real().close(fd);
    }
  }
  if (s->config.debug)
    report(
        "debug: calls that bypass staging unseen: io_uring, raw syscall(2), openat2, "
        "vmsplice, and programs linked statically; calls that send a file to plain I/O for good: "
        "mmap/mmap64, aio_*/lio_listio, freopen, a second open of a staged file, dup2/dup3 onto "
        "descriptors 0-2 or 65536 and above, fcntl(F_SETFL); descriptors 65536 and above are "
        "never staged");
}

State& state() {
  pthread_once(&state_once, make_state);
  return *state_ptr.load(std::memory_order_acquire);
}

void release(State& s, StagedFile* file) {
  for (auto it = s.files.begin(); it != s.files.end(); ++it)
    if (it->get() == file) {
      {
        std::lock_guard file_lock(file->mutex);
        file->release();
      }
      s.retired.push_back(std::move(*it));
      s.files.erase(it);
      s.live.store(s.files.size(), std::memory_order_release);
      {
        std::lock_guard index_lock(s.index_mutex);
        s.index.erase(std::find(s.index.begin(), s.index.end(), file));
      }
      return;
    }
}

/// file->release(), its descriptor parked (State::parked). The file's lock is held.
void release_parking(State& s, StagedFile* file) {
  const int kept = file->release_keeping_descriptor();
  if (kept < 0) return;
  s.parked.emplace(file->identity(), kept);
  s.parked_count.store(s.parked.size(), std::memory_order_release);
}

bool in_range(int fd) { return fd >= 0 && fd < kMaxFd; }

int adopt(State& s, int fd, const std::string& path, int flags) {
  std::string error;
  auto file = StagedFile::create(fd, path, flags, s.config, error);
  if (!file) {
    report(error + "; writing it directly");
    errno = EIO;
    return -1;
  }
  file->app_fds = 1;
  s.slots[fd].store(file.get(), std::memory_order_release);
  {
    std::lock_guard index_lock(s.index_mutex);
    s.index.push_back(file.get());
  }
  s.files.push_back(std::move(file));
  s.live.store(s.files.size(), std::memory_order_release);
  return 0;
}

StagedFile* find_inode(State& s, dev_t device, ino_t inode) {
  for (auto& file : s.files)
    if (file->identity() == std::pair{device, inode}) return file.get();
  return nullptr;
}

/// Settles and releases `file` with every descriptor of it (s.mutex held); 0 or -1 with errno.
int settle_and_release(State& s, StagedFile* file) {
  {
    // Released in the same hold of its lock as it was settled: a write another thread makes
    // meanwhile goes to the file (staged_or_plain), never to a file about to be released.
    std::lock_guard file_lock(file->mutex);
    if (file->settle() != 0) return -1;  // keep staging what could not be written
    release_parking(s, file);
  }
  for (auto& slot : s.slots)
    if (slot.load() == file) slot.store(nullptr);
  release(s, file);
  return 0;
}

int plain_io_locked(State& s, dev_t device, ino_t inode) {
  s.plain.insert({device, inode});
  while (StagedFile* file = find_inode(s, device, inode))
    if (settle_and_release(s, file) != 0) return -1;
  return 0;
}

std::string path_of_cwd() {
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof(cwd)) ? std::string(cwd) : std::string();
}

std::string path_of(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::string resolved_path(int dirfd, const char* path) {
  if (!path) return "";
  std::string absolute = path;
  if (path[0] != '/') {
    // The working directory or the directory's path as the kernel names it: a deleted one
    // ("/d (deleted)") or one out of reach ("(unreachable)/d") resolves to nothing below.
    const std::string base = dirfd == AT_FDCWD ? path_of_cwd() : path_of(dirfd);
    if (base.empty() || base[0] != '/') return "";
    absolute = path[0] ? base + "/" + path : base;
  }
  char resolved[PATH_MAX];
  return realpath(absolute.c_str(), resolved) ? std::string(resolved) : std::string();
}

namespace {

/// settle_elsewhere, with `resolved` = resolved_path(dirfd, path) already known.
int settle_resolved_elsewhere(int dirfd, const char* path, const std::string& resolved,
                              const struct stat64& st) {
  const bool buffered = buffers::beneath_buffer_root(dirfd, path, st.st_dev);
  if (resolved.empty()) return 0;
  if (!buffered) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!s.config.wants(resolved)) return 0;
  }
  return agent::settle_elsewhere(resolved, st.st_dev, st.st_ino, buffered);
}

}  // namespace

int settle_elsewhere(int dirfd, const char* path, const struct stat64& st) {
  if (!agent::configured()) return 0;
  return settle_resolved_elsewhere(dirfd, path, resolved_path(dirfd, path), st);
}

bool settle_program(const char* path) {
  if (!path || !agent::configured()) return false;
  const int program_errno = errno;
  struct stat64 st {};
  const bool beneath = real().stat64(path, &st) == 0 && S_ISREG(st.st_mode) &&
                       buffers::beneath_buffer_root(AT_FDCWD, path, st.st_dev);
  if (beneath) (void)settle_resolved_elsewhere(AT_FDCWD, path, resolved_path(AT_FDCWD, path), st);
  errno = program_errno;
  return beneath;
}

namespace {

/// Opened for writing, not around the page cache: what staging may take.
bool writes_through_staging(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY && !(flags & (O_DIRECT | O_PATH));
}

}  // namespace

StagedFile* staged(int fd) {
  State* s = state_ptr.load(std::memory_order_acquire);
  if (!in_range(fd) || !s) return nullptr;
  return s->slots[fd].load(std::memory_order_acquire);
}

bool stages_new_files(int flags) {
  if (!writes_through_staging(flags)) return false;
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.config.enabled && !s.final;
}

void consider(int fd, int flags, bool created) {
  const bool writes = writes_through_staging(flags);
  if (!writes && !any_staged()) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  // Two open file descriptions of one file would each see only their own writes: plain I/O.
  if (find_inode(s, st.st_dev, st.st_ino)) {
    (void)plain_io_locked(s, st.st_dev, st.st_ino);
    return;
  }
  if (!writes) return;
  // A set-user-ID or set-group-ID file loses those bits when an unprivileged process writes it:
  // the kernel decides at each write, so its writes go straight to it.
  // Standard input, output and error are written by libc's own streams (printf), whose writes
  // staging cannot see: a file opened onto 0, 1 or 2 goes straight to its file.
  if (!in_range(fd) || fd <= STDERR_FILENO || s.final || !s.config.enabled ||
      s.plain.count({st.st_dev, st.st_ino}) || (st.st_mode & (S_ISUID | S_ISGID)))
    return;
  const std::string path = path_of(fd);
  if (path.empty() || path[0] != '/' || !s.config.wants(path)) return;
  // Recovery reopens a logged file by its name, as this user: a file the user may not open for
  // writing (created read-only) would keep its logged bytes from it after a crash. Its writes go
  // straight to it.
  if (s.config.stage_dir && !buffers::user_may_open_for_writing(fd)) return;
  // The same rule when the other description came first (opened before, for reading, or not
  // staged): the file is plain I/O for good. A file this open created has no other.
  if (!created && open_files::others_refer_to(fd, st.st_dev, st.st_ino)) {
    (void)plain_io_locked(s, st.st_dev, st.st_ino);
    return;
  }
  (void)adopt(s, fd, path, flags);
}

int stage_fd(int fd) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int flags = real().fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  if (!in_range(fd) || (flags & O_ACCMODE) == O_RDONLY || (flags & O_DIRECT)) {
    errno = EINVAL;
    return -1;
  }
  if (s.slots[fd].load()) return 0;
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return -1;
  }
  return adopt(s, fd, path_of(fd), flags);
}

bool any_staged() {
  State* s = state_ptr.load(std::memory_order_acquire);
  return s && s->live.load(std::memory_order_acquire) > 0;
}

StagedFile* staged_inode(dev_t device, ino_t inode) {
  if (!any_staged()) return nullptr;
  State& s = state();
  std::lock_guard lock(s.mutex);
  return find_inode(s, device, inode);
}

StagedFile* staged_path(int dirfd, const char* path, int flags) {
  if (!any_staged() || !path) return nullptr;
  struct stat64 st {};
  if (real().fstatat64(dirfd, path, &st, flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) != 0 ||
      !S_ISREG(st.st_mode))
    return nullptr;
  return staged_inode(st.st_dev, st.st_ino);
}

int plain_io(dev_t device, ino_t inode) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return plain_io_locked(s, device, inode);
}

int plain_io_fd(int fd) {
  if (!any_staged()) return 0;
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return plain_io(st.st_dev, st.st_ino);
}

int before_open(int dirfd, const char* path, int flags) {
  if (!path) return 0;
  const bool mine = buffers::holds_any();
  const bool others = agent::configured();
  if (!mine && !others && !any_staged()) return 0;
  // The file about to be opened, if it exists: another process's or this one's staged file.
  // The kernel reads the path first: a pointer it cannot read (EFAULT, which the real open then
  // returns too) is never dereferenced here.
  struct stat64 st {};
  const int at = (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0;
  const bool exists = real().fstatat64(dirfd, path, &st, at) == 0;
  if (!exists && errno == EFAULT) return 0;
  if (!exists || !S_ISREG(st.st_mode)) return 0;
  // Its absolute name, resolved once for both settles below.
  const std::string resolved = mine || others ? resolved_path(dirfd, path) : std::string();
  // What this process left on buffer nodes comes back before the file is opened again. Known
  // by its absolute name ("" when it has none: the nodes then drain all this user holds).
  if (mine &&
      !buffers::settle_file(resolved, st.st_ino, state().node_wait.load(std::memory_order_relaxed)))
    return -1;
  if (others && settle_resolved_elsewhere(dirfd, path, resolved, st) != 0) return -1;
  return staged_inode(st.st_dev, st.st_ino) ? plain_io(st.st_dev, st.st_ino) : 0;
}

void settle_for_reader(const std::string& path, bool same_host, dev_t device, ino_t inode) {
  if (!any_staged()) return;
  const agent::ReaderWaiting now;  // flush at once, whatever the strategy's turn
  State& s = state();
  std::vector<StagedFile*> matching;
  {
    std::lock_guard index_lock(s.index_mutex);
    for (StagedFile* file : s.index)
      if (same_host ? file->identity() == std::pair{device, inode} : file->path() == path)
        matching.push_back(file);
  }
  // Released files stay allocated, so the pointers stay good; one released meanwhile has
  // nothing left to settle.
  for (StagedFile* file : matching) {
    std::lock_guard file_lock(file->mutex);
    (void)file->settle();  // a failure stays staged, reported at its close
  }
}

int forget_range(unsigned first, unsigned last) {
  if (!any_staged()) return 0;
  int result = 0;
  int first_errno = 0;
  for (unsigned fd = first; fd <= last && fd < static_cast<unsigned>(kMaxFd); ++fd)
    if (staged(static_cast<int>(fd)) && forget(static_cast<int>(fd)) != 0 && result == 0) {
      result = -1;
      first_errno = errno;
    }
  if (result) errno = first_errno;
  return result;
}

void alias(int fd, int new_fd) {
  StagedFile* file = staged(fd);
  if (!file || new_fd == fd) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  // Out of our table, or a standard stream (its FILE writes through libc's internal write):
  // writes through the new descriptor would bypass staging, so the file goes to plain I/O.
  if (!in_range(new_fd) || new_fd <= STDERR_FILENO) {
    const auto [device, inode] = file->identity();
    if (plain_io_locked(s, device, inode) != 0)
      report(file->path() + ": staged writes could not be written before descriptor " +
             std::to_string(new_fd) + " was made (" + std::strerror(errno) + ")");
    return;
  }
  file->app_fds += 1;
  s.slots[new_fd].store(file, std::memory_order_release);
}

int forget(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return 0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.slots[fd].store(nullptr, std::memory_order_release);
  if (--file->app_fds > 0) return 0;
  int result;
  {
    std::lock_guard file_lock(file->mutex);
    result = file->close_flush();
    file->release();  // in the same hold, as in settle_and_release
  }
  release(s, file);
  return result;
}

bool any_parked() {
  State* s = state_ptr.load(std::memory_order_acquire);
  return s && s->parked_count.load(std::memory_order_acquire) > 0;
}

int close_unparking(int fd) {
  struct stat64 st {};
  const bool known = real().fstat64(fd, &st) == 0;
  const int result = real().close(fd);
  if (!known) return result;
  const int saved = errno;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto [first, last] = s.parked.equal_range({st.st_dev, st.st_ino});
  for (auto it = first; it != last; ++it) close_kept(it->second);
  s.parked.erase(first, last);
  s.parked_count.store(s.parked.size(), std::memory_order_release);
  errno = saved;
  return result;
}

int unstage(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return 0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  return settle_and_release(s, file);
}

int flush_all() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  int result = 0;
  int first_errno = 0;
  for (auto& file : s.files) {
    std::lock_guard file_lock(file->mutex);
    if (file->flush() != 0 && result == 0) {
      result = -1;
      first_errno = errno;
    }
  }
  if (result) errno = first_errno;
  return result;
}

int unstage_all(bool final) {
  if (final) end_detected_phase();  // before taking the lock: it reads nothing of the registry
  State& s = state();
  std::lock_guard lock(s.mutex);
  int result = 0;
  int first_errno = 0;
  if (final) s.final = true;
  for (size_t i = 0; i < s.files.size();) {
    StagedFile* file = s.files[i].get();
    int flushed;
    {
      // Before fork or exec the files are read on as plain I/O: the buffer nodes' bytes too
      // must be in them. At exit, the nodes keep what they hold and drain it as ordered; the
      // exit closes the files, so each is published as a close would (close-to-open).
      std::lock_guard file_lock(file->mutex);
      flushed = final ? file->close_flush() : file->settle();
      if (flushed == 0) release_parking(s, file);  // in the same hold, as settle_and_release
    }
    if (flushed != 0) {
      if (result == 0) first_errno = errno;
      result = -1;
      // Could not write it: keep staging it, but make further writes go straight through.
      std::lock_guard file_lock(file->mutex);
      file->write_through();
      ++i;
      continue;
    }
    for (auto& slot : s.slots)
      if (slot.load() == file) slot.store(nullptr);
    release(s, file);
  }
  if (result) errno = first_errno;
  return result;
}

void set_config(const Config& config) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.config = config;
  s.node_wait = config.node_wait;
  s.final = false;
}

Config current_config() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.config;
}

}  // namespace harmonia::bbio
