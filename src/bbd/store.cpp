#include "bbd/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <utility>

#include "common/beneath.hpp"
#include "common/file_name.hpp"
#include "common/identity.hpp"
#include "common/log.hpp"
#include "core/requests/registry.hpp"
#include "storage/fences.hpp"
#include "storage/log_format.hpp"
#include "storage/real.hpp"

namespace harmonia::bbd {

namespace fences = storage::fences;

namespace {

constexpr const char* kSuffix = ".bblog";
/// Beside each log segment NUMBER.bblog: NUMBER.bbfile, whose file it holds (JSON: the writer's
/// job, the PFS file's inode and its file handle), for a restarted node.
constexpr const char* kFileSuffix = ".bbfile";
/// The staged-in copies' directory under the device directory (log names are digits only).
constexpr const char* kStageDir = "stage-in";
/// A copy is made only of a file whose ctime is at least this much older than the copy's
/// start: a change within the same clock tick as the identity's fstat would go unnoticed.
constexpr std::int64_t kSettledNs = 1'000'000'000;
/// The piece a stage-in copies at a time (between two questions whether to go on).
constexpr std::size_t kCopyPiece = 1 << 20;
/// The largest stripe a stage-in may name (1 TiB): stripe offsets cannot overflow.
constexpr std::uint64_t kMaxStripe = 1ULL << 40;
/// How long the bytes drained of a job that holds nothing more are still reported.
constexpr auto kDrainedMemory = std::chrono::minutes(10);
/// mmap offsets are multiples of the page size.
const std::uint64_t kPage = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
/// The largest file handle kept (MAX_HANDLE_SZ in the kernel).
constexpr std::size_t kMaxHandle = 128;

struct Record {
  std::uint64_t offset, length, log_at;  // log_at: where the data starts in the log
};

/// Segments a file's writes spread over when they come at once: each copies on its own, where
/// the kernel copies into one file one write at a time (its inode lock).
constexpr unsigned kLanes = 4;

/// Ranges of a file, disjoint and merged: start -> end.
using Ranges = std::map<std::uint64_t, std::uint64_t>;

bool overlaps(const Ranges& ranges, std::uint64_t from, std::uint64_t to) {
  auto next = ranges.upper_bound(from);
  if (next != ranges.begin() && std::prev(next)->second > from) return true;
  return next != ranges.end() && next->first < to;
}

void add(Ranges& ranges, std::uint64_t from, std::uint64_t to) {
  auto next = ranges.upper_bound(from);
  if (next != ranges.begin() && std::prev(next)->second >= from) {
    --next;
    from = next->first;
    to = std::max(to, next->second);
    next = ranges.erase(next);
  }
  for (; next != ranges.end() && next->first <= to; next = ranges.erase(next))
    to = std::max(to, next->second);
  ranges.emplace(from, to);
}

bool read_all_at(int fd, char* data, std::size_t length, off_t at) {
  while (length > 0) {
    const ssize_t n = pread(fd, data, length, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    at += n;
    length -= static_cast<std::size_t>(n);
  }
  return true;
}

/// The pipe a drain splices through, made at its first use: it asks for 1 MiB (an unprivileged
/// node gets at most /proc/sys/fs/pipe-max-size, 1 MiB by default).
struct Pipe {
  int fds[2] = {-1, -1};
  std::uint64_t bytes = 0;
  bool ready() {
    if (fds[0] >= 0) return true;
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    (void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    const int size = fcntl(fds[1], F_GETPIPE_SZ);
    bytes = size > 0 ? static_cast<std::uint64_t>(size) : 4096;
    return true;
  }
  ~Pipe() {
    common::close_fd(fds[0]);
    common::close_fd(fds[1]);
  }
};

/// Whether the kernel refused to copy between two files with `error` (nothing was copied).
bool cannot_copy(int error) {
  return error == EXDEV || error == EINVAL || error == ENOSYS || error == EOPNOTSUPP;
}

/// `length` bytes from `from` to `to` in the kernel, page cache to page cache: copy_file_range
/// (which may share the blocks, on one file system), else splice through `pipe` (across file
/// systems: the log's pages go into the pipe by reference and are copied once, into the PFS
/// file's). False with errno; cannot_copy(errno) when the kernel cannot copy between these
/// files this way.
bool copy_in_kernel(Store::KernelCopy how, Pipe& pipe, int from, std::uint64_t from_at, int to,
                    std::uint64_t to_at, std::uint64_t length) {
  auto in = static_cast<loff_t>(from_at), out = static_cast<loff_t>(to_at);
  if (how == Store::KernelCopy::Range) {
    while (length > 0) {
      const ssize_t n = copy_file_range(from, &in, to, &out, length, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      if (n == 0) {
        errno = EIO;  // the log is shorter than its records say
        return false;
      }
      length -= static_cast<std::uint64_t>(n);
    }
    return true;
  }
  if (!pipe.ready()) return false;
  while (length > 0) {
    // At most what the empty pipe holds, all of it out again before the next.
    const ssize_t n =
        splice(from, &in, pipe.fds[1], nullptr, std::min(length, pipe.bytes), SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;  // the log is shorter than its records say
      return false;
    }
    for (auto queued = static_cast<std::size_t>(n); queued > 0;) {
      const ssize_t written = splice(pipe.fds[0], nullptr, to, &out, queued, SPLICE_F_MOVE);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        // The pipe still holds bytes: it goes, and the next copy makes another.
        if (written == 0) errno = EIO;
        const int error = errno;
        common::close_fd(pipe.fds[0]);
        common::close_fd(pipe.fds[1]);
        pipe.fds[0] = pipe.fds[1] = -1;
        errno = error;
        return false;
      }
      queued -= static_cast<std::size_t>(written);
    }
    length -= static_cast<std::uint64_t>(n);
  }
  return true;
}

/// Releases a fence lock (fences::lock; -1: none) when it goes.
struct FenceLock {
  int fd;
  ~FenceLock() { fences::unlock(fd); }
};

/// Closes a descriptor when it goes.
struct Closer {
  int fd;
  ~Closer() { common::close_fd(fd); }
};

/// NUMBER of "NUMBER<suffix>" (digits only), else nothing.
std::optional<std::uint64_t> log_number(const std::string& name, const char* suffix) {
  const std::size_t tail = std::strlen(suffix);
  if (name.size() <= tail || name.size() - tail > 18 ||
      name.compare(name.size() - tail, std::string::npos, suffix) != 0)
    return std::nullopt;
  const std::string number = name.substr(0, name.size() - tail);
  if (number.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(number);
}

/// Where the file of the log segment `log_name` is described: NUMBER.bbfile beside NUMBER.bblog.
std::string file_name_of(const std::string& log_name) {
  return log_name.substr(0, log_name.size() - std::strlen(kSuffix)) + kFileSuffix;
}

/// The file handle of `fd` (name_to_handle_at), "" where the file system or kernel has none.
std::string handle_of(int fd) {
  std::string bytes(sizeof(file_handle) + kMaxHandle, '\0');
  auto* handle = reinterpret_cast<file_handle*>(bytes.data());
  handle->handle_bytes = kMaxHandle;
  int mount = 0;
  if (name_to_handle_at(fd, "", handle, &mount, AT_EMPTY_PATH) != 0) return "";
  bytes.resize(sizeof(file_handle) + handle->handle_bytes);
  return bytes;
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> unhex(const std::string& text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t k = 0; k < text.size(); k += 2) {
    const auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = digit(text[k]), low = digit(text[k + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
  }
  return out;
}

/// What a segment's .bbfile says of its file.
struct FileRecord {
  std::string job;
  std::uint64_t inode = 0;
  std::string handle;       ///< file_handle bytes; "" when the file system has none
  bool named_only = false;  ///< the file was known by its name only (no inode from the client)
};

bool write_file_record(int dir, const std::string& name, const FileRecord& record) {
  const nlohmann::json json = {{"job", record.job},
                               {"inode", record.inode},
                               {"handle", hex(record.handle)},
                               {"named_only", record.named_only}};
  const std::string text = json.dump();
  const int fd = common::open_beneath(dir, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  const iovec whole{const_cast<char*>(text.data()), text.size()};
  const bool ok = storage::pwritev_all(fd, &whole, 1, 0) >= 0;
  const int error = errno;
  close(fd);
  errno = error;
  return ok;
}

/// The record kept in `name`, or nothing when it is missing or unreadable.
std::optional<FileRecord> read_file_record(int dir, const std::string& name) {
  const int fd = common::open_beneath(dir, name, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string text(65536, '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), 0);
  close(fd);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(n));
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object() || !json.contains("job") || !json["job"].is_string() ||
      !json.contains("inode") || !json["inode"].is_number_unsigned() || !json.contains("handle") ||
      !json["handle"].is_string())
    return std::nullopt;
  const auto handle = unhex(json["handle"].get<std::string>());
  if (!handle) return std::nullopt;
  return FileRecord{json["job"].get<std::string>(), json["inode"].get<std::uint64_t>(), *handle,
                    json.value("named_only", false)};
}

/// The identity fstat gives `st`.
FileIdentity identity_of(const struct stat& st) {
  const auto ns = [](const timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  return {static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim),
          static_cast<std::uint64_t>(st.st_ino)};
}

std::int64_t wall_clock_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

/// The bytes of the stripes a copy made with `spec` holds of a file of `size` bytes.
std::uint64_t stripe_bytes_held(const StageSpec& spec, std::uint64_t size) {
  const std::uint64_t stripes = (size + spec.stripe_bytes - 1) / spec.stripe_bytes;
  if (spec.stripe_index >= stripes) return 0;
  // Stripes index, index + count, ...: all full but perhaps the file's last one.
  const std::uint64_t mine = (stripes - 1 - spec.stripe_index) / spec.stripe_count + 1;
  const std::uint64_t last = spec.stripe_index + (mine - 1) * spec.stripe_count;
  return (mine - 1) * spec.stripe_bytes +
         std::min(spec.stripe_bytes, size - last * spec.stripe_bytes);
}

/// Removes everything a previous run left in the copies' directory (a cache: nothing to keep).
void empty_directory(int dir) {
  DIR* listing = fdopendir(fcntl(dir, F_DUPFD_CLOEXEC, 0));
  std::vector<std::string> names;
  while (const dirent* entry = listing ? readdir(listing) : nullptr)
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
      names.emplace_back(entry->d_name);
  if (listing) closedir(listing);
  for (const auto& name : names) unlinkat(dir, name.c_str(), 0);
}

/// The name a fence of the file with `inode` has (fences are kept by file, not by name).
std::string fence_name(std::uint64_t inode) { return std::to_string(inode); }

}  // namespace

struct Store::Copy {
  std::string name;  // in DEVICE/stage-in
  int fd = -1;
  FileIdentity identity;  // of the PFS file when copied
  uid_t owner = 0;        // the user the copy was made for
  StageSpec spec;
  std::uint64_t bytes = 0;
  ~Copy() {
    if (fd >= 0) close(fd);
  }
};

/// One log file on the device: records appended in order, never rewritten. A write takes its
/// record's place under the file's lock, copies its bytes there without it, and commits in the
/// order of the places (Store::write): `records` lists only committed ones.
///
/// Up to kLanes segments of a file are open (take places) at once, the newest ones. A write
/// that overlaps places of open segments goes to the newest of those; one that overlaps none may
/// go to any. So of two records of a file that overlap, the later one is later in the same
/// segment or in a newer one: the segments' order and each one's records give every byte its
/// latest write (reads, drains, a restart).
struct Store::Segment {
  std::string name;          // NUMBER.bblog, in the device directory
  std::string path;          // the same for messages: DEVICE/NUMBER.bblog
  std::uint64_t number = 0;  // order of creation
  int fd = -1;
  std::uint64_t end = 0;        // where the next record's place begins
  std::uint64_t committed = 0;  // where the first place not yet committed begins
  unsigned copying = 0;         // places taken and not yet committed
  /// A record committed (under the file's lock): the next place and drains wait for it.
  std::condition_variable committed_one;
  /// Where a record failed to copy: the log ends there (cut once no copy is running), and
  /// records placed after it are written again in a new segment.
  std::optional<std::uint64_t> broken_at;
  std::uint64_t bytes = 0;  // data held
  std::vector<Record> records;
  bool open = false;  // takes places; a sealed segment never again
  Ranges placed;      // the file ranges placed here while open
  ~Segment() {
    if (fd >= 0) close(fd);
  }
};

/// The data held of one PFS file: its segments, oldest first, and the file itself.
struct Store::Log {
  std::mutex mutex;        ///< appends, reads, sealing; guards segments and their places
  std::mutex drain_mutex;  ///< one drain of the file at a time (its order matters)
  std::uint64_t inode = 0;
  std::string name;         // its latest name relative to the PFS root, for people and copies
  int target = -1;          // the PFS file, opened as its owner when the log was made
  std::string handle;       // its file handle, for a restarted node
  bool named_only = false;  // known by name only (no inode from the client)
  std::string job;          // the writer's job (empty when it named none)
  bool recovered = false;   // left by a previous run of the node
  bool orphan = false;      // recovered, its file not found again: never drained
  uid_t owner = 0;          // the user whose data this is (the segments' owner on the device)
  gid_t group = 0;
  std::uint64_t created = 0;       // order of creation: a drain's arrival order
  std::uint64_t bytes = 0;         // held, over all segments; guarded by the store's mutex
  std::uint64_t end = 0;           // the largest offset + length held; guarded by the store's mutex
  std::int64_t last_write_ns = 0;  // when the last write arrived; guarded by the store's mutex
  bool removed = false;            // drained and out of the table; guarded by both mutexes
  std::deque<std::unique_ptr<Segment>> segments;
  /// Closes the open segments to new places (a drain takes them, or a record failed to copy):
  /// the next write opens a new segment, newer than all.
  void seal() {
    for (auto open = segments.rbegin(); open != segments.rend() && (*open)->open; ++open) {
      (*open)->open = false;
      (*open)->placed.clear();
    }
  }
  ~Log() {
    if (target >= 0) close(target);
  }
};

Caller Caller::node() { return Caller{geteuid(), getegid(), true}; }

namespace {

bool may_act_on(const Caller& caller, uid_t owner) { return caller.admin || caller.uid == owner; }

std::string forbidden(const std::string& file, uid_t owner, const Caller& caller) {
  return file + ": its data on this node belongs to uid " + std::to_string(owner) +
         ", not to uid " + std::to_string(caller.uid);
}

}  // namespace

Store::Store(std::string device, std::string pfs_root, std::uint64_t capacity,
             std::string drain_scheduler)
    : device_(std::move(device)),
      pfs_root_(std::move(pfs_root)),
      drain_scheduler_(std::move(drain_scheduler)),
      capacity_(capacity) {
  // Fails here, naming the scheduler, rather than at the first drain.
  queue_ = core::requests::make_request_scheduler(drain_scheduler_);
  struct stat st {};
  for (const auto* dir : {&device_, &pfs_root_})
    if (stat(dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(dir->c_str(), W_OK) != 0)
      throw std::runtime_error(*dir + ": not a writable directory");
  // Everything below the two directories is opened from these, beneath them, with no link
  // followed (common/beneath.hpp).
  device_fd_ = open(device_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  pfs_fd_ = open(pfs_root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  mount_fd_ = open(pfs_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (device_fd_ < 0 || pfs_fd_ < 0 || mount_fd_ < 0 ||
      fstatat(pfs_fd_, "", &st, AT_EMPTY_PATH) != 0) {
    const std::string dir = device_fd_ < 0 ? device_ : pfs_root_;
    const int error = errno;
    common::close_fd(device_fd_);
    common::close_fd(pfs_fd_);
    common::close_fd(mount_fd_);
    throw std::runtime_error(dir + ": " + std::strerror(error));
  }
  pfs_device_ = st.st_dev;
  // The staged-in copies: a cache, emptied (a restarted node is ordered to stage in again).
  stage_fd_ = common::make_dirs_beneath(device_fd_, kStageDir, 0700, O_RDONLY);
  if (stage_fd_ < 0) {
    const int error = errno;
    common::close_fd(device_fd_);
    common::close_fd(pfs_fd_);
    common::close_fd(mount_fd_);
    throw std::runtime_error(common::beneath_error(device_ + "/" + kStageDir, error));
  }
  empty_directory(stage_fd_);
  recover();
}

Store::Reclaimer::Reclaimer() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      std::vector<int> closing;
      closing.swap(pending_);
      if (closing.empty()) return;  // stopping, and nothing left
      lock.unlock();
      for (const int fd : closing) close(fd);
      lock.lock();
    }
  });
}

Store::Reclaimer::~Reclaimer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Store::Reclaimer::close_later(int fd) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(fd);
  }
  wake_.notify_one();
}

Store::~Store() {
  logs_.clear();
  copies_.clear();
  common::close_fd(stage_fd_);
  common::close_fd(device_fd_);
  common::close_fd(pfs_fd_);
  common::close_fd(mount_fd_);
}

void Store::recover() {
  // Every segment a previous run left, oldest first (complete records only: a torn tail was
  // never acknowledged), grouped by the file they hold.
  std::vector<std::pair<std::uint64_t, std::string>> names;  // NUMBER.bblog: creation order
  DIR* listing = fdopendir(fcntl(device_fd_, F_DUPFD_CLOEXEC, 0));
  while (const dirent* entry = listing ? readdir(listing) : nullptr) {
    const std::string name = entry->d_name;
    if (const auto number = log_number(name, kSuffix)) names.emplace_back(*number, name);
  }
  if (listing) closedir(listing);
  std::sort(names.begin(), names.end());
  struct Found {
    LogPtr log;
    std::string name;  // the file's name when its first segment was made
  };
  std::map<std::string, Found> files;  // by inode, or by name for files known by name only
  for (const auto& [number, name] : names) {
    next_log_ = std::max(next_log_.load(), number + 1);
    auto segment = std::make_unique<Segment>();
    segment->name = name;
    segment->path = device_ + "/" + name;
    segment->number = number;
    segment->fd = common::open_beneath(device_fd_, name, O_RDWR | O_NONBLOCK);
    if (segment->fd < 0) continue;
    storage::LogScan scan;
    std::uint64_t at = 0, segment_end = 0;
    bool first = true;
    storage::scan_log(segment->fd, scan, [&](const storage::RecordHeader& h, const char*) {
      if (first) {
        at = storage::log_header_size(scan.target);
        first = false;
      }
      segment->records.push_back({h.offset, h.length, at + sizeof(h)});
      segment->bytes += h.length;
      segment_end = std::max(segment_end, h.offset + h.length);
      at += sizeof(h) + h.length;
      return true;
    });
    if (!scan.error.empty() || !common::plain_relative_name(scan.target))
      continue;  // not ours: left alone
    if (first) at = storage::log_header_size(scan.target);
    segment->end = segment->committed = at;
    struct stat owner {};
    if (ftruncate(segment->fd, static_cast<off_t>(at)) != 0 || fstat(segment->fd, &owner) != 0)
      continue;  // drop a torn tail
    const FileRecord record =
        read_file_record(device_fd_, file_name_of(name)).value_or(FileRecord{"", 0, "", true});
    const std::string key =
        record.named_only ? "name:" + scan.target : "inode:" + std::to_string(record.inode);
    Found& found = files[key];
    if (!found.log) {
      found.log = std::make_shared<Log>();
      found.name = scan.target;
      Log& log = *found.log;
      log.inode = record.inode;
      log.name = scan.target;
      log.handle = record.handle;
      log.named_only = record.named_only;
      log.job = record.job;
      log.recovered = true;
      log.owner = owner.st_uid;
      log.group = owner.st_gid;
      log.created = number;
    }
    found.log->bytes += segment->bytes;
    found.log->end = std::max(found.log->end, segment_end);
    found.log->last_write_ns = std::max<std::int64_t>(
        found.log->last_write_ns,
        static_cast<std::int64_t>(owner.st_mtim.tv_sec) * 1'000'000'000 + owner.st_mtim.tv_nsec);
    found.log->segments.push_back(std::move(segment));
  }
  for (auto& [key, found] : files) {
    Log& log = *found.log;
    // The file again: by its handle (wherever it is now), else by its name.
    int target = -1;
    bool deleted = false;
    if (!log.handle.empty()) {
      const int path_fd = open_by_handle_at(
          mount_fd_, reinterpret_cast<file_handle*>(log.handle.data()), O_PATH | O_CLOEXEC);
      if (path_fd >= 0) {
        // Reopened for writing as the data's owner: the kernel checks the owner's rights.
        const common::ActAs as_owner(log.owner, log.group);
        if (as_owner.ok())
          target = open(("/proc/self/fd/" + std::to_string(path_fd)).c_str(),
                        O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        close(path_fd);
      } else {
        deleted = errno == ESTALE;
      }
    }
    if (target < 0 && !deleted) {
      const common::ActAs as_owner(log.owner, log.group);
      if (as_owner.ok()) {
        const auto [parent, file] = common::split_last(log.name);
        const int dir = log.named_only
                            ? common::make_dirs_beneath(pfs_fd_, parent, 0755, O_PATH)
                            : common::open_beneath(pfs_fd_, parent.empty() ? "." : parent,
                                                   O_PATH | O_DIRECTORY);
        target = dir < 0
                     ? -1
                     : common::open_beneath(
                           dir, file, O_WRONLY | O_NONBLOCK | (log.named_only ? O_CREAT : 0), 0644);
        common::close_fd(dir);
      }
      struct stat st {};
      if (target >= 0 && (fstat(target, &st) != 0 || !S_ISREG(st.st_mode) ||
                          (!log.named_only && st.st_ino != log.inode))) {
        close(target);
        target = -1;
      } else if (target >= 0) {
        log.inode = st.st_ino;
      }
    }
    if (deleted) {
      common::log::warning(pfs_root_ + "/" + log.name + ": deleted while the node was down; its " +
                               std::to_string(log.bytes) + " held bytes are dropped",
                           {log.job, log.owner, ""});
      for (const auto& segment : log.segments) {
        unlinkat(device_fd_, segment->name.c_str(), 0);
        unlinkat(device_fd_, file_name_of(segment->name).c_str(), 0);
      }
      continue;
    }
    if (target < 0) {
      log.orphan = true;
      common::log::warning(pfs_root_ + "/" + log.name +
                               ": not found again (renamed while the node was down, and the node "
                               "cannot open file handles); its " +
                               std::to_string(log.bytes) + " bytes stay held in " +
                               log.segments.front()->path,
                           {log.job, log.owner, ""});
    }
    log.target = target;
    used_ += log.bytes;
    // Two recovered files with one inode cannot both be live: the orphan keeps its own key.
    const std::uint64_t slot = log.orphan ? ~log.created : log.inode;
    logs_[slot] = found.log;
    if (!log.orphan) file_changes_.insert(log.inode);
  }
}

Store::LogPtr Store::find_locked(const FileRef& file) {
  if (file.inode != 0) {
    const auto found = logs_.find(file.inode);
    return found == logs_.end() || found->second->orphan ? nullptr : found->second;
  }
  for (const auto& [inode, log] : logs_)
    if (!log->orphan && log->name == file.name) return log;
  return nullptr;
}

int Store::open_by_handle(const std::string& handle, std::uint64_t inode,
                          const Caller& caller) const {
  if (handle.size() <= sizeof(file_handle) || handle.size() > sizeof(file_handle) + kMaxHandle)
    return -1;
  std::string copy = handle;  // aligned, and with a length that matches its bytes
  auto* parsed = reinterpret_cast<file_handle*>(copy.data());
  if (parsed->handle_bytes != handle.size() - sizeof(file_handle)) return -1;
  // The node's own right to open handles; then the file is reopened with the caller's.
  const Closer path_fd{open_by_handle_at(mount_fd_, parsed, O_PATH | O_CLOEXEC)};
  struct stat st {};
  if (path_fd.fd < 0 || fstat(path_fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != inode ||
      st.st_dev != pfs_device_ || (st.st_uid != caller.uid && !caller.admin))
    return -1;
  const common::ActAs as_caller(caller.uid, caller.gid);
  if (!as_caller.ok()) return -1;
  return open(("/proc/self/fd/" + std::to_string(path_fd.fd)).c_str(),
              O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}

int Store::open_target(const FileRef& file, const Caller& caller, std::string& why,
                       Status& status) const {
  const std::string target = pfs_root_ + "/" + file.name;
  if (file.inode != 0 && !file.handle.empty())
    if (const int fd = open_by_handle(file.handle, file.inode, caller); fd >= 0) return fd;
  // As the writer, beneath the root with no link followed: the PFS lets the node write only
  // what that user could. O_NONBLOCK: a FIFO there cannot hold the node.
  const common::ActAs as_caller(caller.uid, caller.gid);
  if (!as_caller.ok()) {
    why = target + ": " + as_caller.why();
    status = Status::Forbidden;
    return -1;
  }
  const auto [parent, name] = common::split_last(file.name);
  const bool by_name = file.inode == 0;
  const int dir =
      by_name ? common::make_dirs_beneath(pfs_fd_, parent, 0755, O_PATH)
              : common::open_beneath(pfs_fd_, parent.empty() ? "." : parent, O_PATH | O_DIRECTORY);
  const int fd = dir < 0 ? -1
                         : common::open_beneath(
                               dir, name, O_WRONLY | O_NONBLOCK | (by_name ? O_CREAT : 0), 0644);
  const int error = errno;
  common::close_fd(dir);
  if (fd < 0) {
    why = common::beneath_error(target, error) + " (as uid " + std::to_string(caller.uid) + ")";
    status = error == EACCES || error == EPERM || error == EROFS ? Status::Forbidden
             : error == EMFILE || error == ENFILE                ? Status::Full
                                                                 : Status::Invalid;
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    why = target + ": refused: not a regular file";
    status = Status::Invalid;
    return -1;
  }
  if (!by_name && st.st_ino != file.inode) {
    close(fd);
    why = target + ": not the file the client opened (inode " + std::to_string(file.inode) +
          "): renamed or replaced since";
    status = Status::Invalid;
    return -1;
  }
  if (st.st_dev != pfs_device_) {
    close(fd);
    why = target + ": on another file system than the PFS root " + pfs_root_;
    status = Status::Invalid;
    return -1;
  }
  return fd;
}

std::unique_ptr<Store::Segment> Store::new_segment(const Log& log, const std::string& name,
                                                   std::string& why) {
  auto segment = std::make_unique<Segment>();
  segment->number = next_log_.fetch_add(1);
  segment->name = std::to_string(segment->number) + kSuffix;
  segment->path = device_ + "/" + segment->name;
  // Whose file it holds, beside it, before it exists: a restarted node finds the file again.
  const std::string described = file_name_of(segment->name);
  if (!write_file_record(device_fd_, described, {log.job, log.inode, log.handle, log.named_only})) {
    why = device_ + "/" + described + ": " + std::strerror(errno);
    return nullptr;
  }
  segment->fd = common::open_beneath(device_fd_, segment->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  // The segment belongs to the data's owner, so that a restarted node knows whose it is (mode
  // 0600 in a directory of the node's: the owner cannot reach it there).
  const bool owned = segment->fd >= 0 &&
                     (log.owner == geteuid() || fchown(segment->fd, log.owner, log.group) == 0);
  if (segment->fd < 0 || !owned || !storage::write_log_header(segment->fd, name)) {
    why = segment->path + ": " + std::strerror(errno);
    if (segment->fd >= 0) unlinkat(device_fd_, segment->name.c_str(), 0);
    unlinkat(device_fd_, described.c_str(), 0);
    return nullptr;
  }
  segment->end = segment->committed = storage::log_header_size(name);
  return segment;
}

Store::LogPtr Store::log_for(const FileRef& file, const std::string& job, const Caller& caller,
                             std::string& why, Status& status) {
  {
    std::lock_guard lock(mutex_);
    if (LogPtr found = find_locked(file)) return found;
  }
  // The PFS file is opened without the store's lock (the PFS may be slow), then the log is
  // made unless another write of the file made it meanwhile.
  const int target = open_target(file, caller, why, status);
  if (target < 0) return nullptr;
  struct stat st {};
  (void)fstat(target, &st);
  std::lock_guard lock(mutex_);
  if (LogPtr found = find_locked({file.name, static_cast<std::uint64_t>(st.st_ino)})) {
    close(target);
    return found;
  }
  auto log = std::make_shared<Log>();
  log->inode = st.st_ino;
  log->name = file.name;
  log->target = target;
  log->handle = handle_of(target);
  log->named_only = file.inode == 0;
  log->job = job;
  log->owner = caller.uid;
  log->group = caller.gid;
  log->created = next_log_.fetch_add(1);  // no two logs arrive at once
  logs_[log->inode] = log;
  return log;
}

Status Store::write(const FileRef& file, std::uint64_t offset, std::string_view data,
                    const std::string& job, std::string& why, const Caller& caller) {
  if (!common::plain_relative_name(file.name) || fences::reserved(file.name)) {
    why = "bad file name (relative, no . or .. parts, not under .harmonia/)";
    return Status::Invalid;
  }
  if (offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) - data.size()) {
    why = "offset " + std::to_string(offset) + ": past the largest file offset";
    return Status::Invalid;
  }
  if (data.empty()) return Status::Ok;
  for (;;) {
    Status status = Status::Ok;
    const LogPtr log = log_for(file, job, caller, why, status);
    if (!log) return status;
    // A log this write made and could not fill holds nothing: it goes (with its descriptor).
    const auto drop_if_empty = [&] {
      std::lock_guard lock(mutex_);
      std::lock_guard file_lock(log->mutex);
      if (!log->segments.empty() || log->removed) return;
      log->removed = true;
      logs_.erase(log->inode);
    };
    bool fits = true;
    std::string header_name;  // a new segment's (the file's lock never waits for mutex_)
    {
      std::lock_guard lock(mutex_);
      if (!may_act_on(caller, log->owner)) {
        why = forbidden(file.name, log->owner, caller);
        return Status::Forbidden;
      }
      // Renamed since the log was made: it goes by the name its writer knows it by now.
      if (file.inode != 0 && file.name != log->name) log->name = file.name;
      header_name = log->name;
      // The file changes: a staged-in copy of it (made from the PFS file) is stale from now on,
      // and so is one being made.
      for (const std::string* name : {&file.name, static_cast<const std::string*>(&log->name)}) {
        drop_copies_locked(*name);
        if (const auto running = copying_.find(*name); running != copying_.end())
          ++running->second.writes;
      }
      fits = used_ + data.size() <= capacity_;
      if (fits)
        used_ += data.size();  // reserved: concurrent writes cannot take the room meanwhile
      else
        why = "capacity: " + std::to_string(capacity_ - used_) + " bytes left";
    }
    if (!fits) {
      drop_if_empty();
      return Status::Full;
    }
    const auto give_back = [&] {
      std::lock_guard lock(mutex_);
      used_ -= data.size();
    };
    std::unique_lock file_lock(log->mutex);
    if (log->removed) {  // drained and gone meanwhile: the next try makes a new log
      file_lock.unlock();
      give_back();
      continue;
    }
    // The open segment that takes the record: the newest whose places it overlaps; with none,
    // the newest with no copy running, else a new one while fewer than kLanes are open (else, or
    // when no new one can be made, the newest open one).
    const std::uint64_t to = offset + data.size();
    Segment *overlapped = nullptr, *idle = nullptr, *newest_open = nullptr;
    unsigned open = 0;
    for (auto it = log->segments.rbegin(); it != log->segments.rend() && (*it)->open; ++it) {
      Segment* candidate = it->get();
      if (++open == 1) newest_open = candidate;
      if (!overlapped && overlaps(candidate->placed, offset, to)) overlapped = candidate;
      if (!idle && candidate->copying == 0) idle = candidate;
    }
    Segment* lane = overlapped ? overlapped : idle ? idle : open >= kLanes ? newest_open : nullptr;
    if (!lane) {
      if (auto segment = new_segment(*log, header_name, why)) {
        segment->open = true;
        log->segments.push_back(std::move(segment));
        lane = log->segments.back().get();
      } else if (newest_open) {
        lane = newest_open;  // no new segment (descriptors, the device): after a running copy
        why.clear();
      } else {
        file_lock.unlock();
        give_back();
        drop_if_empty();
        return Status::Full;
      }
    }
    // The record's place, taken under the file's lock; its bytes are copied there without it,
    // so that writes of one file from many connections copy side by side.
    Segment& segment = *lane;
    const std::uint64_t at = segment.end;
    segment.end += sizeof(storage::RecordHeader) + data.size();
    ++segment.copying;
    add(segment.placed, offset, to);
    file_lock.unlock();
    storage::RecordHeader header;
    header.offset = offset;
    header.length = data.size();
    header.checksum = storage::record_checksum(header, data.data());
    const iovec parts[2] = {{&header, sizeof(header)},
                            {const_cast<char*>(data.data()), data.size()}};
    const bool copied = storage::pwritev_all(segment.fd, parts, 2, static_cast<off64_t>(at)) >= 0 &&
                        (!sync_writes_ || fdatasync(segment.fd) == 0);
    const int error = errno;
    if (on_copied_) on_copied_(offset);
    // Committed in the order of the places: a record is listed (and its write acknowledged)
    // only after every one before it, so later writes win and a restart, which reads records
    // up to the first incomplete one, loses none that was acknowledged.
    file_lock.lock();
    segment.committed_one.wait(file_lock, [&] { return segment.committed == at; });
    segment.committed = at + sizeof(header) + data.size();
    --segment.copying;
    const bool after_failure = segment.broken_at.has_value();
    if (copied && !after_failure) {
      segment.records.push_back({offset, data.size(), at + sizeof(header)});
      segment.bytes += data.size();
    } else if (!after_failure) {
      segment.broken_at = at;
      log->seal();  // the next write goes to a new segment
      // Its header unreadable at once: a restart before the cut below stops there, and never
      // replays a record whose write was refused (its bytes may be whole: an fdatasync failed).
      const std::uint32_t no_record = 0;
      (void)pwrite(segment.fd, &no_record, sizeof(no_record), static_cast<off_t>(at));
    }
    if (segment.broken_at && segment.copying == 0) {
      // Cut the failed record and what was placed after it, partial or not on the device: the
      // log stays a sequence of complete, acknowledged records.
      (void)ftruncate(segment.fd, static_cast<off_t>(*segment.broken_at));
      segment.end = segment.committed = *segment.broken_at;
    }
    // Before the unlock: once it is free, a drain may take the segment and free it.
    segment.committed_one.notify_all();
    file_lock.unlock();
    if (after_failure) {  // placed after a record that failed: written again, in a new segment
      give_back();
      continue;
    }
    if (!copied) {
      give_back();
      why = "device: " + std::string(std::strerror(error));
      return error == ENOSPC || error == EDQUOT ? Status::Full : Status::Error;
    }
    {
      std::lock_guard lock(mutex_);
      log->bytes += data.size();
      log->end = std::max(log->end, offset + data.size());
      log->last_write_ns = wall_clock_ns();
      received_ += data.size();
      file_changes_.insert(log->inode);
    }
    if (on_write_) on_write_();
    return Status::Ok;
  }
}

Status Store::read(const FileRef& file, std::uint64_t offset, std::uint64_t length,
                   std::string& out, std::string& why, const Caller& caller) {
  if (!common::plain_relative_name(file.name) || length > (64ULL << 20)) {
    why = "bad file name or a read of more than 64 MiB";
    return Status::Invalid;
  }
  LogPtr log;
  {
    std::lock_guard lock(mutex_);
    log = find_locked(file);
  }
  if (!log) return Status::NotHeld;
  if (!may_act_on(caller, log->owner)) {
    why = forbidden(file.name, log->owner, caller);
    return Status::Forbidden;
  }
  std::lock_guard file_lock(log->mutex);
  if (log->removed) return Status::NotHeld;
  out.assign(length, '\0');
  std::vector<bool> covered(length, false);
  for (const auto& segment : log->segments)
    for (const auto& r : segment->records) {  // in order: later writes win
      const std::uint64_t from = std::max(r.offset, offset);
      const std::uint64_t to = std::min(r.offset + r.length, offset + length);
      if (from >= to) continue;
      if (!read_all_at(segment->fd, out.data() + (from - offset), to - from,
                       static_cast<off_t>(r.log_at + (from - r.offset)))) {
        why = segment->path + ": " + std::strerror(errno);
        return Status::Error;
      }
      std::fill(covered.begin() + static_cast<long>(from - offset),
                covered.begin() + static_cast<long>(to - offset), true);
    }
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) return Status::NotHeld;
  return Status::Ok;
}

Status Store::read_staged(const std::string& file, std::uint64_t offset, std::uint64_t length,
                          const FileIdentity& identity, std::string& out, std::string& why,
                          const Caller& caller) {
  if (!common::plain_relative_name(file) || length > (64ULL << 20)) {
    why = "bad file name or a read of more than 64 MiB";
    return Status::Invalid;
  }
  std::lock_guard lock(mutex_);
  // Written data of the file here is newer than any copy of the PFS file.
  if (find_locked({file, identity.inode})) {
    why = file + ": written on this node since it was staged in";
    return Status::NotHeld;
  }
  if (offset > identity.size || length > identity.size - offset) {
    why = file + ": the range ends past the file";
    return Status::NotHeld;
  }
  for (auto it = copies_.lower_bound({file, ""}); it != copies_.end() && it->first.first == file;
       ++it) {
    const Copy& copy = *it->second;
    if (!(copy.identity == identity) || !may_act_on(caller, copy.owner)) continue;
    // Piece by piece (each within one stripe), every one this node's: the copy holds this
    // node's stripes one after the other.
    const std::uint64_t s = copy.spec.stripe_bytes;
    out.assign(length, '\0');
    bool mine = true;
    for (std::uint64_t at = offset; mine && at < offset + length;) {
      const std::uint64_t stripe = at / s;
      const std::uint64_t piece = std::min((stripe + 1) * s, offset + length) - at;
      mine = stripe % copy.spec.stripe_count == copy.spec.stripe_index;
      const std::uint64_t copy_at = stripe / copy.spec.stripe_count * s + at % s;
      if (mine &&
          !read_all_at(copy.fd, out.data() + (at - offset), piece, static_cast<off_t>(copy_at))) {
        why = device_ + "/" + kStageDir + "/" + copy.name + ": " + std::strerror(errno);
        out.clear();
        return Status::Error;
      }
      at += piece;
    }
    if (mine) {
      staged_read_ += length;
      return Status::Ok;
    }
  }
  out.clear();
  why = file + ": no copy of this file as the reader sees it, for this reader, with that range";
  return Status::NotHeld;
}

void Store::free_copy(const Copy& copy) {
  unlinkat(stage_fd_, copy.name.c_str(), 0);
  used_ -= copy.bytes;
  staged_ -= copy.bytes;
}

void Store::drop_copies_locked(const std::string& file) {
  for (auto it = copies_.lower_bound({file, ""}); it != copies_.end() && it->first.first == file;) {
    free_copy(*it->second);
    it = copies_.erase(it);
  }
}

void Store::drop_stage_in(const std::string& key) {
  std::lock_guard lock(mutex_);
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (it->first.second != key) {
      ++it;
      continue;
    }
    free_copy(*it->second);
    it = copies_.erase(it);
  }
}

Status Store::stage_in(const StageSpec& spec, const std::string& file,
                       const std::function<bool()>& keep_going, std::uint64_t& bytes,
                       std::string& why) {
  bytes = 0;
  const std::string source = pfs_root_ + "/" + file;
  if (!common::plain_relative_name(file) || fences::reserved(file)) {
    why = source + ": bad file name (relative, no . or .. parts, not under .harmonia/)";
    return Status::Invalid;
  }
  if (spec.stripe_bytes == 0 || spec.stripe_bytes > kMaxStripe ||
      spec.stripe_index >= spec.stripe_count) {
    why = source + ": stripe " + std::to_string(spec.stripe_index) + " of " +
          std::to_string(spec.stripe_count) + " with stripes of " +
          std::to_string(spec.stripe_bytes) + " bytes: no such stripe";
    return Status::Invalid;
  }
  const std::int64_t start = wall_clock_ns();
  // Opened as the job's user, beneath the root with no link followed; then only the
  // descriptor is used (O_NONBLOCK: a FIFO there cannot hold the node).
  int fd = -1;
  {
    const common::ActAs as_user(spec.uid, spec.gid);
    if (!as_user.ok()) {
      why = source + ": " + as_user.why();
      return Status::Forbidden;
    }
    fd = common::open_beneath(pfs_fd_, file, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  }
  if (fd < 0) {
    const int error = errno;
    why = common::beneath_error(source, error) + " (as uid " + std::to_string(spec.uid) + ")";
    return error == EACCES || error == EPERM ? Status::Forbidden
           : error == ENOENT                 ? Status::NotHeld
                                             : Status::Invalid;
  }
  struct Closer {
    int fd;
    ~Closer() { common::close_fd(fd); }
  } source_closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = source + ": refused: not a regular file";
    return Status::Invalid;
  }
  const FileIdentity before = identity_of(st);
  if (before.ctime_ns > start - kSettledNs) {
    why = source + ": changed less than 1 s before the copy began (a change within the same " +
          "clock tick would go unnoticed)";
    return Status::Error;
  }
  const std::uint64_t need = stripe_bytes_held(spec, before.size);
  std::uint64_t writes_before = 0;
  auto copy = std::make_unique<Copy>();
  copy->identity = before;
  copy->owner = spec.uid;
  copy->spec = spec;
  copy->bytes = need;
  {
    std::lock_guard lock(mutex_);
    if (used_ + need > capacity_) {
      why = source + ": no room for its " + std::to_string(need) + " bytes on this node (" +
            std::to_string(capacity_ - used_) + " left)";
      return Status::Full;
    }
    used_ += need;  // reserved now, so that writes meanwhile cannot take the room
    staged_ += need;
    copy->name = std::to_string(next_copy_++);
    Copying& running = copying_[file];
    ++running.running;
    writes_before = running.writes;
  }
  // Undoes the reservation, and the copy's file, unless it is kept.
  bool kept = false;
  struct Release {
    Store& store;
    const std::string& file;
    Copy& copy;
    bool& kept;
    ~Release() {
      std::lock_guard lock(store.mutex_);
      if (auto running = store.copying_.find(file);
          running != store.copying_.end() && --running->second.running == 0)
        store.copying_.erase(running);
      if (kept) return;
      store.used_ -= copy.bytes;
      store.staged_ -= copy.bytes;
      if (copy.fd >= 0) unlinkat(store.stage_fd_, copy.name.c_str(), 0);
    }
  } release{*this, file, *copy, kept};
  copy->fd = common::open_beneath(stage_fd_, copy->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  const std::string target = device_ + "/" + kStageDir + "/" + copy->name;
  if (copy->fd < 0) {
    why = target + ": " + std::strerror(errno);
    return Status::Error;
  }
  // This node's stripes, one after the other in the copy.
  std::string buffer(std::min<std::uint64_t>(kCopyPiece, std::max<std::uint64_t>(need, 1)), '\0');
  std::uint64_t copy_at = 0;
  const std::uint64_t stripes = (before.size + spec.stripe_bytes - 1) / spec.stripe_bytes;
  for (std::uint64_t stripe = spec.stripe_index; stripe < stripes; stripe += spec.stripe_count) {
    const std::uint64_t stripe_end = std::min((stripe + 1) * spec.stripe_bytes, before.size);
    for (std::uint64_t at = stripe * spec.stripe_bytes; at < stripe_end;) {
      if (!keep_going()) {
        why = source + ": abandoned (no longer ordered)";
        return Status::Error;
      }
      const std::size_t piece = std::min<std::uint64_t>(buffer.size(), stripe_end - at);
      errno = 0;
      if (!read_all_at(fd, buffer.data(), piece, static_cast<off_t>(at))) {
        why = source + ": " + (errno != 0 ? std::strerror(errno) : "shorter than its size");
        return Status::Error;
      }
      const iovec whole{buffer.data(), piece};
      if (storage::pwritev_all(copy->fd, &whole, 1, static_cast<off64_t>(copy_at)) < 0) {
        const int error = errno;
        why = target + ": " + std::strerror(error);
        return error == ENOSPC || error == EDQUOT ? Status::Full : Status::Error;
      }
      at += piece;
      copy_at += piece;
    }
  }
  if (fstat(fd, &st) != 0 || !(identity_of(st) == before)) {
    why = source + ": changed while it was copied";
    return Status::Error;
  }
  std::lock_guard lock(mutex_);
  if (copying_[file].writes != writes_before) {
    why = source + ": written on this node while it was copied (the written data wins)";
    return Status::Error;
  }
  auto& slot = copies_[{file, spec.key}];
  if (slot) {  // the same file for the same stage-in again: the new copy replaces the old
    free_copy(*slot);
  }
  bytes = need;
  slot = std::move(copy);
  kept = true;
  return Status::Ok;
}

bool Store::copy_records(const std::vector<Segment*>& segments, int target,
                         const std::vector<fences::Range>& fenced) {
  Pipe pipe;
  for (const Segment* segment : segments) {
    const auto& records = segment->records;
    std::size_t k = 0;
    while (k < records.size()) {
      // Records that continue each other in the file: one run.
      std::size_t end = k + 1;
      std::uint64_t bytes = records[k].length;
      while (end < records.size() && bytes < (64ULL << 20) &&
             records[end].offset == records[k].offset + bytes) {
        bytes += records[end].length;
        ++end;
      }
      // In the kernel, page cache to page cache, when the file systems allow it.
      bool copied = false;
      for (KernelCopy how = kernel_copy_.load(); !copied && how != KernelCopy::None;) {
        copied = true;
        for (std::size_t r = k; copied && r < end; ++r) {
          const Record& record = records[r];
          for (const auto& piece : fences::uncovered(record.offset, record.length, fenced))
            if (!copy_in_kernel(how, pipe, segment->fd,
                                record.log_at + (piece.offset - record.offset), target,
                                piece.offset, piece.length)) {
              // Not this way between these file systems: the run again, the next way.
              if (!cannot_copy(errno)) return false;
              how = how == KernelCopy::Range ? KernelCopy::Splice : KernelCopy::None;
              kernel_copy_ = how;
              copied = false;
              break;
            }
        }
      }
      if (!copied) {
        // The log's pages mapped, written straight from there: one copy, one write per piece.
        const std::uint64_t first = records[k].log_at & ~(kPage - 1);
        const std::uint64_t last = records[end - 1].log_at + records[end - 1].length;
        void* mapped = mmap(nullptr, last - first, PROT_READ, MAP_SHARED | MAP_POPULATE,
                            segment->fd, static_cast<off_t>(first));
        if (mapped == MAP_FAILED) return false;
        bool ok = true;
        // Pieces that continue each other in the file (all of the run, without fences): one
        // pwritev.
        std::vector<iovec> parts;
        std::uint64_t parts_at = 0, parts_end = 0;
        const auto flush_parts = [&] {
          ok = ok && storage::pwritev_all(target, parts.data(), static_cast<int>(parts.size()),
                                          static_cast<off64_t>(parts_at)) >= 0;
          parts.clear();
        };
        for (std::size_t r = k; ok && r < end; ++r) {
          const Record& record = records[r];
          char* data = static_cast<char*>(mapped) + (record.log_at - first);
          for (const auto& piece : fences::uncovered(record.offset, record.length, fenced)) {
            if (!parts.empty() && piece.offset != parts_end) flush_parts();
            if (parts.empty()) parts_at = piece.offset;
            parts.push_back({data + (piece.offset - record.offset), piece.length});
            parts_end = piece.offset + piece.length;
          }
        }
        if (!parts.empty()) flush_parts();
        const int error = errno;
        munmap(mapped, last - first);
        errno = error;
        if (!ok) return false;
      }
      k = end;
    }
  }
  return true;
}

Status Store::drain_log(const LogPtr& log, std::string& why) {
  std::lock_guard drain_lock(log->drain_mutex);
  // The segments there are now; writes from here on go to a new one, and are not held up.
  std::vector<Segment*> batch;
  {
    std::unique_lock file_lock(log->mutex);
    if (log->removed) return Status::Ok;  // another drain took it meanwhile
    for (const auto& segment : log->segments) batch.push_back(segment.get());
    log->seal();
    // Writes placed in these segments before the seal finish first: their records drain too.
    for (Segment* segment : batch)
      segment->committed_one.wait(file_lock, [segment] { return segment->copying == 0; });
  }
  std::string name;
  {
    std::lock_guard lock(mutex_);
    name = log->name;
  }
  const std::string target = pfs_root_ + "/" + name;
  if (log->orphan) {
    why = target + ": not found again after the node restarted; its data stays held";
    return Status::Error;
  }
  std::uint64_t bytes = 0;
  for (const Segment* segment : batch) bytes += segment->bytes;
  if (!batch.empty()) {
    struct stat st {};
    if (fstat(log->target, &st) != 0) {
      why = target + ": " + std::strerror(errno);
      return Status::Error;
    }
    // Ranges clients wrote elsewhere after losing this node hold newer bytes than these logs: a
    // fence is honoured only from who could have written them (root, this node's user, or the
    // owner of the file: fences::read).
    std::string ignored;
    const auto fenced =
        fence_node_.empty()
            ? std::vector<fences::Range>{}
            : fences::read(pfs_fd_, fence_node_, fence_name(log->inode), st.st_uid, &ignored);
    if (!ignored.empty())
      common::log::warning(pfs_root_ + "/" + ignored, {log->job, log->owner, fence_node_});
    ++draining_;
    bool ok = false;
    int error = 0;
    {
      // Written as the data's owner, as the program's own writes would have been: the kernel
      // then clears set-user-ID and set-group-ID bits as it would for them.
      const common::ActAs as_owner(log->owner, log->group);
      ok = as_owner.ok() && copy_records(batch, log->target, fenced) && fsync(log->target) == 0;
      error = as_owner.ok() ? errno : EPERM;
    }
    --draining_;
    if (!ok) {
      why = target + ": " + std::strerror(error);
      return Status::Error;  // everything stays held: drained again later, in order
    }
    // The node holds nothing of the file now but newer segments: its fence has done its work.
    if (!fence_node_.empty()) fences::remove(pfs_fd_, fence_node_, fence_name(log->inode));
  }
  std::lock_guard lock(mutex_);
  std::lock_guard file_lock(log->mutex);
  for (std::size_t k = 0; k < batch.size(); ++k) {
    Segment& drained = *log->segments.front();
    unlinkat(device_fd_, drained.name.c_str(), 0);
    unlinkat(device_fd_, file_name_of(drained.name).c_str(), 0);
    if (drained.fd >= 0) reclaimer_.close_later(std::exchange(drained.fd, -1));
    log->segments.pop_front();
  }
  log->bytes -= bytes;
  used_ -= bytes;
  drained_ += bytes;
  if (bytes > 0) {
    Drained& drained = drained_by_job_[log->job];
    drained.bytes += bytes;
    drained.at = std::chrono::steady_clock::now();
  }
  if (log->segments.empty()) {
    log->removed = true;
    logs_.erase(log->inode);
    file_changes_.insert(log->inode);
  }
  return Status::Ok;
}

int Store::lock_fences() {
  if (fence_node_.empty()) return -1;
  const int fd = fences::lock(pfs_fd_, fence_node_);
  if (fd < 0 && !fence_warned_.exchange(true))
    common::log::warning(pfs_root_ + ": cannot take the fence lock (" + std::strerror(errno) +
                             "); drains go on without it",
                         {"", std::nullopt, fence_node_});
  return fd;
}

void Store::set_fence_node(const std::string& node) {
  fence_node_ = node;
  // Its directories sticky and writable by all: every user fences, nobody removes another's.
  if (const int error = fences::prepare(pfs_fd_, node))
    common::log::warning(
        common::beneath_error(pfs_root_ + "/" + fences::kReservedDir + "/fences/" + node, error),
        {"", std::nullopt, node});
  drop_stale_fences();
}

void Store::drop_stale_fences() {
  if (fence_node_.empty()) return;
  // A fence covers writes a client may have left here; with no log of the file here there are
  // none (a drain consumed them, or they never arrived), and it must not skip later writes.
  const FenceLock fence_lock{lock_fences()};
  std::lock_guard lock(mutex_);
  fences::remove_unless(pfs_fd_, fence_node_, [this](const std::string& fence) {
    for (const auto& [inode, log] : logs_)
      if (fence == fence_name(log->inode)) return true;
    return false;
  });
}

Status Store::drain(const FileRef& file, std::string& why, const Caller& caller) {
  if (!file.name.empty() && !common::plain_relative_name(file.name)) {
    why = "bad file name";
    return Status::Invalid;
  }
  std::vector<LogPtr> chosen;
  {
    std::lock_guard lock(mutex_);
    if (!file.name.empty()) {
      LogPtr log = find_locked(file);
      if (!log) return Status::Ok;  // nothing held: drained
      if (!may_act_on(caller, log->owner)) {
        why = forbidden(file.name, log->owner, caller);
        return Status::Forbidden;
      }
      chosen.push_back(std::move(log));
    } else {
      for (const auto& [inode, log] : logs_)
        if (may_act_on(caller, log->owner)) chosen.push_back(log);
      std::sort(chosen.begin(), chosen.end(),
                [](const LogPtr& a, const LogPtr& b) { return a->created < b->created; });
    }
  }
  const FenceLock fence_lock{lock_fences()};
  Status result = Status::Ok;
  for (const LogPtr& log : chosen) {
    std::string failed;
    if (drain_log(log, failed) != Status::Ok) {
      if (result == Status::Ok) why = failed;
      result = Status::Error;
    }
  }
  return result;
}

Status Store::drain_next(const std::set<std::string>& jobs, std::string& file, std::string& why) {
  namespace req = harmonia::core::requests;
  std::lock_guard queue_lock(queue_mutex_);
  // Candidates: files of the ordered jobs, and logs recovered after a crash (their writers are
  // gone; nothing else will drain them).
  const auto candidate = [&jobs](const Log& log) {
    return !log.orphan && !log.removed && log.bytes > 0 && (log.recovered || jobs.count(log.job));
  };
  const auto now = static_cast<req::Time>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - started_)
                                              .count());
  std::vector<LogPtr> waiting;  // candidates, oldest first: the fallback when nothing dispatches
  {
    std::lock_guard lock(mutex_);
    for (const auto& [inode, log] : logs_) {
      if (!candidate(*log)) continue;
      waiting.push_back(log);
      if (queued_logs_.count(log->created)) continue;
      // A file is one request of its held bytes, of its writer's job.
      const auto app = job_ids_.emplace(log->job, static_cast<core::AppId>(job_ids_.size())).first;
      const req::RequestId id = ++next_request_;
      queue_->enqueue({id, id, 0, std::max<std::uint64_t>(1, log->bytes), core::Op::Write,
                       app->second, 0, now});
      queued_[id] = log;
      queued_logs_.insert(log->created);
    }
  }
  if (waiting.empty()) return Status::NotHeld;
  std::sort(waiting.begin(), waiting.end(),
            [](const LogPtr& a, const LogPtr& b) { return a->created < b->created; });
  // What the scheduler dispatches now; a file no longer to drain (its job's order changed, or
  // drained meanwhile by a Drain) is released unmoved, and queued again when it may drain.
  std::vector<std::pair<req::RequestId, LogPtr>> chosen;
  const req::Batch batch = queue_->dequeue(now);
  for (const auto& dispatch : batch.dispatches)
    for (const auto& part : dispatch.parts) {
      LogPtr log = queued_[part.id].lock();
      bool take = false;
      {
        std::lock_guard lock(mutex_);
        take = log && candidate(*log);
      }
      if (take) {
        chosen.emplace_back(part.id, std::move(log));
        continue;
      }
      queue_->release(part.id, 0);
      if (log) queued_logs_.erase(log->created);
      queued_.erase(part.id);
    }
  // A window or quantum scheduler may hold everything back at this instant: then the oldest
  // goes, so that a file never waits for a window that nothing else opens.
  if (chosen.empty()) chosen.emplace_back(0, waiting.front());
  const FenceLock fence_lock{lock_fences()};
  Status result = Status::Ok;
  file.clear();
  for (const auto& [id, log] : chosen) {
    {
      std::lock_guard lock(mutex_);
      if (file.empty()) file = log->name;
    }
    const auto started = std::chrono::steady_clock::now();
    std::string failed;
    if (drain_log(log, failed) != Status::Ok && result == Status::Ok) {
      result = Status::Error;
      why = failed;
      std::lock_guard lock(mutex_);
      file = log->name;
    }
    if (id == 0) continue;  // not dispatched: it stays queued
    queue_->release(id, static_cast<req::Time>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - started)
                                                   .count()));
    queued_logs_.erase(log->created);
    queued_.erase(id);
  }
  return result;
}

StoreStats Store::stats() {
  std::lock_guard lock(mutex_);
  StoreStats out;
  out.capacity = capacity_;
  out.used = used_;
  out.drained = drained_;
  out.received = received_;
  out.draining = draining_.load() > 0;
  out.staged = staged_;
  out.staged_read = staged_read_;
  for (const auto& [inode, log] : logs_) {
    if (log->orphan) {
      out.orphaned += log->bytes;
      continue;
    }
    if (log->bytes == 0) continue;
    ++out.files;
    out.held_by_job[log->job] += log->bytes;
  }
  for (const auto& [where, copy] : copies_)
    out.staged_by_key[where.second][where.first] = copy->bytes;
  // Jobs whose data last drained long ago are forgotten: the report stays as small as the work.
  const auto now = std::chrono::steady_clock::now();
  for (auto it = drained_by_job_.begin(); it != drained_by_job_.end();) {
    if (now - it->second.at > kDrainedMemory && !out.held_by_job.count(it->first)) {
      it = drained_by_job_.erase(it);
      continue;
    }
    out.drained_by_job[it->first] = it->second.bytes;
    ++it;
  }
  return out;
}

bool Store::holds(const FileRef& file) {
  std::lock_guard lock(mutex_);
  const LogPtr log = find_locked(file);
  return log && log->bytes > 0;
}

std::optional<Writer> Store::writer_of(const FileRef& file) {
  std::lock_guard lock(mutex_);
  const LogPtr log = find_locked(file);
  if (!log) return std::nullopt;
  return Writer{log->job, log->owner};
}

HeldFileChanges Store::take_file_changes(bool all) {
  std::lock_guard lock(mutex_);
  HeldFileChanges out;
  const auto state = [](const Log& log) {
    return HeldFileState{log.inode, log.name, log.end, log.last_write_ns, log.owner, log.handle};
  };
  if (all) {
    for (const auto& [inode, log] : logs_)
      if (!log->orphan && log->bytes > 0) out.held.push_back(state(*log));
  } else {
    // A changed file is held while its log holds bytes; otherwise it is released, whatever the
    // change was (the scheduler must never keep a file whose inode a new file may take).
    for (const std::uint64_t inode : file_changes_) {
      const auto found = logs_.find(inode);
      if (found != logs_.end() && !found->second->orphan && found->second->bytes > 0)
        out.held.push_back(state(*found->second));
      else
        out.released.push_back(inode);
    }
  }
  file_changes_.clear();
  return out;
}

std::map<std::string, std::uint64_t> Store::held() {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::uint64_t> out;
  for (const auto& [inode, log] : logs_)
    if (log->bytes > 0) out[log->name] += log->bytes;
  return out;
}

}  // namespace harmonia::bbd
