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
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

#include "common/beneath.hpp"
#include "common/file_name.hpp"
#include "common/identity.hpp"
#include "core/requests/registry.hpp"
#include "storage/fences.hpp"
#include "storage/log_format.hpp"
#include "storage/real.hpp"

namespace harmonia::bbd {

namespace fences = storage::fences;

namespace {

constexpr const char* kSuffix = ".bblog";
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

struct Record {
  std::uint64_t offset, length, log_at;  // log_at: where the data starts in the log
};

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

/// copy_file_range of `length` bytes; false with errno (EXDEV, EINVAL, ENOSYS or EOPNOTSUPP
/// with nothing copied: the kernel cannot copy between these files).
bool copy_in_kernel(int from, std::uint64_t from_at, int to, std::uint64_t to_at,
                    std::uint64_t length) {
  auto in = static_cast<loff_t>(from_at), out = static_cast<loff_t>(to_at);
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

/// Releases a fence lock (fences::lock; -1: none) when it goes.
struct FenceLock {
  int fd;
  ~FenceLock() { fences::unlock(fd); }
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

/// Where the job of the log `log_name` is kept: NUMBER.bbjob beside NUMBER.bblog.
std::string job_name(const std::string& log_name) {
  return log_name.substr(0, log_name.size() - std::strlen(kSuffix)) + ".bbjob";
}

bool write_job(int dir, const std::string& name, const std::string& job) {
  const int fd = common::open_beneath(dir, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  const iovec whole{const_cast<char*>(job.data()), job.size()};
  const bool ok = storage::pwritev_all(fd, &whole, 1, 0) >= 0;
  const int error = errno;
  close(fd);
  errno = error;
  return ok;
}

/// The job kept in `name` ("" when there is none: its writer named none).
std::string read_job(int dir, const std::string& name) {
  const int fd = common::open_beneath(dir, name, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return "";
  char buffer[4096];
  const ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
  close(fd);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
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

struct Store::Log {
  std::string name;  // NUMBER.bblog, in the device directory
  std::string path;  // the same for messages: DEVICE/NUMBER.bblog
  int fd = -1;
  std::uint64_t end = 0;      // where the next record goes
  std::uint64_t start = 0;    // the first record
  std::uint64_t bytes = 0;    // data held
  std::uint64_t created = 0;  // order of creation: a drain's arrival order
  std::string job;            // the writer's job (empty when it named none)
  bool recovered = false;     // left by a previous run of the node
  uid_t owner = 0;            // the user whose data this is (the log file's owner on the device)
  gid_t group = 0;
  std::vector<Record> records;
  ~Log() {
    if (fd >= 0) close(fd);
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
  (void)core::requests::make_request_scheduler(drain_scheduler_);
  struct stat st {};
  for (const auto* dir : {&device_, &pfs_root_})
    if (stat(dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(dir->c_str(), W_OK) != 0)
      throw std::runtime_error(*dir + ": not a writable directory");
  // Everything below the two directories is opened from these, beneath them, with no link
  // followed (common/beneath.hpp).
  device_fd_ = open(device_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  pfs_fd_ = open(pfs_root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (device_fd_ < 0 || pfs_fd_ < 0) {
    const std::string dir = device_fd_ < 0 ? device_ : pfs_root_;
    const int error = errno;
    common::close_fd(device_fd_);
    common::close_fd(pfs_fd_);
    throw std::runtime_error(dir + ": " + std::strerror(error));
  }
  // The staged-in copies: a cache, emptied (a restarted node is ordered to stage in again).
  stage_fd_ = common::make_dirs_beneath(device_fd_, kStageDir, 0700, O_RDONLY);
  if (stage_fd_ < 0) {
    const int error = errno;
    common::close_fd(device_fd_);
    common::close_fd(pfs_fd_);
    throw std::runtime_error(common::beneath_error(device_ + "/" + kStageDir, error));
  }
  empty_directory(stage_fd_);
  // Recovery: index the logs a previous run left, oldest first (complete records only; a torn
  // tail was never acknowledged).
  std::vector<std::pair<std::uint64_t, std::string>> names;  // NUMBER.bblog: creation order
  DIR* listing = fdopendir(fcntl(device_fd_, F_DUPFD_CLOEXEC, 0));
  while (const dirent* entry = listing ? readdir(listing) : nullptr) {
    const std::string name = entry->d_name;
    const auto number = log_number(name, kSuffix);
    if (number) names.emplace_back(*number, name);
  }
  if (listing) closedir(listing);
  std::sort(names.begin(), names.end());
  for (const auto& [number, name] : names) {
    auto log = std::make_unique<Log>();
    log->name = name;
    log->path = device_ + "/" + name;
    log->created = number;
    next_log_ = std::max(next_log_, number + 1);
    log->fd = common::open_beneath(device_fd_, name, O_RDWR | O_NONBLOCK);
    if (log->fd < 0) continue;
    storage::LogScan scan;
    std::uint64_t at = 0;
    bool first = true;
    storage::scan_log(log->fd, scan, [&](const storage::RecordHeader& h, const char*) {
      if (first) {
        at = storage::log_header_size(scan.target);
        log->start = at;
        first = false;
      }
      log->records.push_back({h.offset, h.length, at + sizeof(h)});
      log->bytes += h.length;
      at += sizeof(h) + h.length;
      return true;
    });
    if (!scan.error.empty() || !common::plain_relative_name(scan.target))
      continue;  // not ours: left alone
    if (first) log->start = at = storage::log_header_size(scan.target);
    log->end = at;
    if (ftruncate(log->fd, static_cast<off_t>(at)) != 0) continue;  // drop a torn tail
    log->job = read_job(device_fd_, job_name(name));
    struct stat owner {};
    if (fstat(log->fd, &owner) != 0) continue;
    log->owner = owner.st_uid;
    log->group = owner.st_gid;
    log->recovered = true;
    const auto older = logs_.find(scan.target);
    if (older != logs_.end()) {
      // Two logs of one file: the older one's deletion failed after its drain, or it could not
      // drain. It goes first (writes are idempotent); if it cannot, the newer waits on the
      // device for the next start.
      std::string why;
      if (drain_one(scan.target, *older->second, why) != Status::Ok) {
        std::fprintf(stderr, "harmonia-bbd: %s: left for the next start (%s drains first: %s)\n",
                     log->path.c_str(), older->second->path.c_str(), why.c_str());
        continue;
      }
      logs_.erase(older);
    }
    used_ += log->bytes;
    logs_[scan.target] = std::move(log);
  }
}

Store::~Store() {
  logs_.clear();
  copies_.clear();
  common::close_fd(stage_fd_);
  common::close_fd(device_fd_);
  common::close_fd(pfs_fd_);
}

Store::Log* Store::log_for(const std::string& file, const std::string& job, const Caller& caller,
                           std::string& why) {
  auto found = logs_.find(file);
  if (found != logs_.end()) return found->second.get();
  auto log = std::make_unique<Log>();
  log->created = next_log_;
  log->job = job;
  log->owner = caller.uid;
  log->group = caller.gid;
  log->name = std::to_string(next_log_++) + kSuffix;
  log->path = device_ + "/" + log->name;
  // The writer's job beside the log, for the scheduler after a restart.
  if (!job.empty() && !write_job(device_fd_, job_name(log->name), job)) {
    why = device_ + "/" + job_name(log->name) + ": " + std::strerror(errno);
    return nullptr;
  }
  log->fd = common::open_beneath(device_fd_, log->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  // The log belongs to the data's owner, so that a restarted node knows whose it is (mode 0600
  // in a directory of the node's: the owner cannot reach it there).
  const bool owned =
      log->fd >= 0 && (log->owner == geteuid() || fchown(log->fd, log->owner, log->group) == 0);
  if (log->fd < 0 || !owned || !storage::write_log_header(log->fd, file)) {
    why = log->path + ": " + std::strerror(errno);
    if (log->fd >= 0) unlinkat(device_fd_, log->name.c_str(), 0);
    unlinkat(device_fd_, job_name(log->name).c_str(), 0);
    return nullptr;
  }
  log->start = log->end = storage::log_header_size(file);
  return logs_.emplace(file, std::move(log)).first->second.get();
}

Status Store::write(const std::string& file, std::uint64_t offset, std::string_view data,
                    const std::string& job, std::string& why, const Caller& caller) {
  if (!common::plain_relative_name(file) || fences::reserved(file)) {
    why = "bad file name (relative, no . or .. parts, not under .harmonia/)";
    return Status::Invalid;
  }
  if (offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) - data.size()) {
    why = "offset " + std::to_string(offset) + ": past the largest file offset";
    return Status::Invalid;
  }
  if (data.empty()) return Status::Ok;
  std::lock_guard lock(mutex_);
  const auto held = logs_.find(file);
  if (held != logs_.end() && !may_act_on(caller, held->second->owner)) {
    why = forbidden(file, held->second->owner, caller);
    return Status::Forbidden;
  }
  if (held == logs_.end()) {
    if (!drainable(file, why)) return Status::Invalid;
    if (const Status allowed = may_write(file, caller, why); allowed != Status::Ok) return allowed;
  }
  // The file changes: a staged-in copy of it (made from the PFS file) is stale from now on,
  // and so is one being made.
  drop_copies_locked(file);
  if (const auto running = copying_.find(file); running != copying_.end()) ++running->second.writes;
  if (used_ + data.size() > capacity_) {
    why = "capacity: " + std::to_string(capacity_ - used_) + " bytes left";
    return Status::Full;
  }
  Log* log = log_for(file, job, caller, why);
  if (!log) return Status::Full;
  storage::RecordHeader header;
  header.offset = offset;
  header.length = data.size();
  header.checksum = storage::record_checksum(header, data.data());
  const iovec parts[2] = {{&header, sizeof(header)}, {const_cast<char*>(data.data()), data.size()}};
  const std::size_t total = sizeof(header) + data.size();
  if (storage::pwritev_all(log->fd, parts, 2, static_cast<off64_t>(log->end)) < 0 ||
      (sync_writes_ && fdatasync(log->fd) != 0)) {
    const int error = errno;
    // Cut the record, partial or not on the device: the log stays a sequence of complete,
    // acknowledged ones.
    (void)ftruncate(log->fd, static_cast<off_t>(log->end));
    why = "device: " + std::string(std::strerror(error));
    return error == ENOSPC || error == EDQUOT ? Status::Full : Status::Error;
  }
  log->records.push_back({offset, data.size(), log->end + sizeof(header)});
  log->end += total;
  log->bytes += data.size();
  used_ += data.size();
  received_ += data.size();
  return Status::Ok;
}

Status Store::read(const std::string& file, std::uint64_t offset, std::uint64_t length,
                   std::string& out, std::string& why, const Caller& caller) {
  if (!common::plain_relative_name(file) || length > (64ULL << 20)) {
    why = "bad file name or a read of more than 64 MiB";
    return Status::Invalid;
  }
  std::lock_guard lock(mutex_);
  const auto found = logs_.find(file);
  if (found == logs_.end()) return Status::NotHeld;
  const Log& log = *found->second;
  if (!may_act_on(caller, log.owner)) {
    why = forbidden(file, log.owner, caller);
    return Status::Forbidden;
  }
  out.assign(length, '\0');
  std::vector<bool> covered(length, false);
  for (const auto& r : log.records) {  // in order: later writes win
    const std::uint64_t from = std::max(r.offset, offset);
    const std::uint64_t to = std::min(r.offset + r.length, offset + length);
    if (from >= to) continue;
    if (!read_all_at(log.fd, out.data() + (from - offset), to - from,
                     static_cast<off_t>(r.log_at + (from - r.offset)))) {
      why = log.path + ": " + std::strerror(errno);
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
  if (logs_.count(file)) {
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

bool Store::drainable(const std::string& file, std::string& why) const {
  // Nothing there yet (ENOENT) is fine: the drain makes it. A link on the way, or something
  // that is no regular file, is refused now rather than at the drain.
  const int fd = common::open_beneath(pfs_fd_, file, O_PATH);
  struct stat st {};
  const int error = fd < 0 ? errno : fstatat(fd, "", &st, AT_EMPTY_PATH) != 0 ? errno : 0;
  common::close_fd(fd);
  if (error == ELOOP || error == EXDEV) {
    why = common::beneath_error(pfs_root_ + "/" + file, error);
    return false;
  }
  if (fd >= 0 && error == 0 && !S_ISREG(st.st_mode)) {
    why = pfs_root_ + "/" + file + ": refused: not a regular file";
    return false;
  }
  return true;
}

Status Store::may_write(const std::string& file, const Caller& caller, std::string& why) const {
  const common::ActAs as_caller(caller.uid, caller.gid);
  if (!as_caller.ok()) {
    why = pfs_root_ + "/" + file + ": " + as_caller.why();
    return Status::Forbidden;
  }
  const auto [parent, name] = common::split_last(file);
  const int dir = common::make_dirs_beneath(pfs_fd_, parent, 0755, O_PATH);
  const int fd =
      dir < 0 ? -1 : common::open_beneath(dir, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
  const int error = errno;
  common::close_fd(dir);
  if (fd >= 0) {
    common::close_fd(fd);
    return Status::Ok;
  }
  why = common::beneath_error(pfs_root_ + "/" + file, error) + " (as uid " +
        std::to_string(caller.uid) + ")";
  return error == EACCES || error == EPERM || error == EROFS ? Status::Forbidden : Status::Invalid;
}

Status Store::drain_one(const std::string& file, Log& log, std::string& why) {
  const std::string target = pfs_root_ + "/" + file;
  // Opened once, beneath the root with no link followed (the directories too, each made
  // relative to its parent's descriptor), with the file-system identity of the data's owner:
  // the PFS lets the node write only what that user could. Then only the descriptor is used,
  // so a link swapped in meanwhile changes nothing. O_NONBLOCK: a FIFO there cannot hold the
  // drain.
  const auto [parent, name] = common::split_last(file);
  int fd = -1;
  {
    const common::ActAs as_owner(log.owner, log.group);
    if (!as_owner.ok()) {
      why = target + ": " + as_owner.why();
      return Status::Error;
    }
    const int dir = common::make_dirs_beneath(pfs_fd_, parent, 0755, O_PATH);
    fd = dir < 0 ? -1 : common::open_beneath(dir, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
    const int error = errno;
    common::close_fd(dir);
    errno = error;
  }
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    common::close_fd(fd);
    why = target + ": refused: not a regular file";
    return Status::Error;
  }
  if (fd < 0) {
    why = common::beneath_error(target, errno);
    return Status::Error;
  }
  // Ranges clients wrote elsewhere after losing this node hold newer bytes than this log: a
  // fence is honoured only from who could have written them (root, this node's user, or the
  // owner of the file: fences::read).
  std::string ignored;
  const auto fenced = fence_node_.empty()
                          ? std::vector<fences::Range>{}
                          : fences::read(pfs_fd_, fence_node_, file, st.st_uid, &ignored);
  if (!ignored.empty())
    std::fprintf(stderr, "harmonia-bbd: %s/%s\n", pfs_root_.c_str(), ignored.c_str());
  std::size_t k = 0;
  bool ok = true;
  while (ok && k < log.records.size()) {
    // Records that continue each other in the file: one run.
    std::size_t end = k + 1;
    std::uint64_t bytes = log.records[k].length;
    while (end < log.records.size() && bytes < (64ULL << 20) &&
           log.records[end].offset == log.records[k].offset + bytes) {
      bytes += log.records[end].length;
      ++end;
    }
    // In the kernel, page cache to page cache, when the file systems allow it.
    bool copied = kernel_copy_.load();
    for (std::size_t r = k; copied && r < end; ++r) {
      const Record& record = log.records[r];
      for (const auto& piece : fences::uncovered(record.offset, record.length, fenced)) {
        if (!copy_in_kernel(log.fd, record.log_at + (piece.offset - record.offset), fd,
                            piece.offset, piece.length)) {
          // Not between these file systems: the run again, from a mapping of the log.
          if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
            kernel_copy_ = false;
          else
            ok = false;
          copied = false;
          break;
        }
      }
    }
    if (ok && !copied) {
      // The log's pages mapped, written straight from there: one copy, one write per piece.
      const std::uint64_t first = log.records[k].log_at & ~(kPage - 1);
      const std::uint64_t last = log.records[end - 1].log_at + log.records[end - 1].length;
      void* mapped = mmap(nullptr, last - first, PROT_READ, MAP_SHARED | MAP_POPULATE, log.fd,
                          static_cast<off_t>(first));
      ok = mapped != MAP_FAILED;
      // Pieces that continue each other in the file (all of the run, without fences): one
      // pwritev.
      std::vector<iovec> parts;
      std::uint64_t parts_at = 0, parts_end = 0;
      const auto flush_parts = [&] {
        ok = ok && storage::pwritev_all(fd, parts.data(), static_cast<int>(parts.size()),
                                        static_cast<off64_t>(parts_at)) >= 0;
        parts.clear();
      };
      for (std::size_t r = k; ok && r < end; ++r) {
        const Record& record = log.records[r];
        char* data = static_cast<char*>(mapped) + (record.log_at - first);
        for (const auto& piece : fences::uncovered(record.offset, record.length, fenced)) {
          if (!parts.empty() && piece.offset != parts_end) flush_parts();
          if (parts.empty()) parts_at = piece.offset;
          parts.push_back({data + (piece.offset - record.offset), piece.length});
          parts_end = piece.offset + piece.length;
        }
      }
      if (!parts.empty()) flush_parts();
      if (mapped != MAP_FAILED) munmap(mapped, last - first);
    }
    k = end;
  }
  ok = ok && fsync(fd) == 0;
  const int error = errno;
  close(fd);
  if (!ok) {
    why = target + ": " + std::strerror(error);
    return Status::Error;  // everything stays held: drained again later, in order
  }
  // The node holds nothing of the file now: its fence has done its work.
  if (!fence_node_.empty()) fences::remove(pfs_fd_, fence_node_, file);
  drained_ += log.bytes;
  Drained& drained = drained_by_job_[log.job];
  drained.bytes += log.bytes;
  drained.at = std::chrono::steady_clock::now();
  used_ -= log.bytes;
  unlinkat(device_fd_, log.name.c_str(), 0);
  unlinkat(device_fd_, job_name(log.name).c_str(), 0);
  return Status::Ok;
}

int Store::lock_fences() {
  if (fence_node_.empty()) return -1;
  const int fd = fences::lock(pfs_fd_, fence_node_);
  if (fd < 0 && !fence_warned_.exchange(true))
    std::fprintf(stderr,
                 "harmonia-bbd: %s: cannot take the fence lock (%s); drains go on without it\n",
                 pfs_root_.c_str(), std::strerror(errno));
  return fd;
}

void Store::set_fence_node(const std::string& node) {
  fence_node_ = node;
  // Its directories sticky, so that users cannot delete or replace each other's fences.
  if (const int error = fences::prepare(pfs_fd_, node))
    std::fprintf(
        stderr, "harmonia-bbd: %s\n",
        common::beneath_error(pfs_root_ + "/" + fences::kReservedDir + "/fences/" + node, error)
            .c_str());
  drop_stale_fences();
}

void Store::drop_stale_fences() {
  if (fence_node_.empty()) return;
  // A fence covers writes a client may have left here; with no log of the file here there are
  // none (a drain consumed them, or they never arrived), and it must not skip later writes.
  const FenceLock fence_lock{lock_fences()};
  std::lock_guard lock(mutex_);
  fences::remove_unless(pfs_fd_, fence_node_,
                        [this](const std::string& file) { return logs_.count(file) > 0; });
}

Status Store::drain(const std::string& file, std::string& why, const Caller& caller) {
  if (!file.empty() && !common::plain_relative_name(file)) {
    why = "bad file name";
    return Status::Invalid;
  }
  const FenceLock fence_lock{lock_fences()};  // before the store's mutex: clients take it first
  std::lock_guard lock(mutex_);
  if (!file.empty()) {
    const auto held = logs_.find(file);
    if (held != logs_.end() && !may_act_on(caller, held->second->owner)) {
      why = forbidden(file, held->second->owner, caller);
      return Status::Forbidden;
    }
  }
  draining_ = true;
  Status result = Status::Ok;
  for (auto it = logs_.begin(); it != logs_.end();) {
    if ((!file.empty() && it->first != file) || !may_act_on(caller, it->second->owner)) {
      ++it;
      continue;
    }
    if (drain_one(it->first, *it->second, why) == Status::Ok) {
      it = logs_.erase(it);
    } else {
      result = Status::Error;
      ++it;
    }
  }
  draining_ = false;
  return result;
}

Status Store::drain_next(const std::set<std::string>& jobs, std::string& file, std::string& why) {
  // Candidates: files of the ordered jobs, and logs recovered after a crash (their writers are
  // gone; nothing else will drain them). The request scheduler picks which goes first.
  const auto candidate = [&jobs](const Log& log) { return log.recovered || jobs.count(log.job); };
  {
    // Idle nodes ask often: the fence lock (a PFS round trip) only when there is work.
    std::lock_guard lock(mutex_);
    if (std::none_of(logs_.begin(), logs_.end(),
                     [&](const auto& entry) { return candidate(*entry.second); }))
      return Status::NotHeld;
  }
  const FenceLock fence_lock{lock_fences()};  // before the store's mutex: clients take it first
  std::lock_guard lock(mutex_);
  namespace req = harmonia::core::requests;
  const auto scheduler = req::make_request_scheduler(drain_scheduler_);
  std::vector<std::map<std::string, std::unique_ptr<Log>>::iterator> candidates;
  for (auto it = logs_.begin(); it != logs_.end(); ++it)
    if (candidate(*it->second)) candidates.push_back(it);
  // In arrival order: the scheduler's clock never goes back.
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return a->second->created < b->second->created; });
  std::map<std::string, core::AppId> job_ids;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    const Log& log = *candidates[k]->second;
    const auto app = job_ids.emplace(log.job, static_cast<core::AppId>(job_ids.size())).first;
    scheduler->enqueue({k + 1, k + 1, 0, std::max<std::uint64_t>(1, log.bytes), core::Op::Write,
                        app->second, 0, static_cast<req::Time>(log.created)});
  }
  if (candidates.empty()) return Status::NotHeld;
  const auto batch = scheduler->dequeue(static_cast<req::Time>(next_log_));
  // A window scheduler may hold everything back at this instant: then the oldest goes.
  const auto chosen = batch.dispatches.empty()
                          ? candidates.front()
                          : candidates[batch.dispatches.front().parts.front().id - 1];
  file = chosen->first;
  draining_ = true;
  const Status status = drain_one(chosen->first, *chosen->second, why);
  draining_ = false;
  if (status == Status::Ok) logs_.erase(chosen);
  return status;
}

StoreStats Store::stats() {
  std::lock_guard lock(mutex_);
  StoreStats out{capacity_, used_, drained_, received_, static_cast<std::uint32_t>(logs_.size()),
                 draining_, {},    {},       staged_,   staged_read_,
                 {}};
  for (const auto& entry : logs_) out.held_by_job[entry.second->job] += entry.second->bytes;
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

std::map<std::string, std::uint64_t> Store::held() {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::uint64_t> out;
  for (const auto& [file, log] : logs_) out[file] = log->bytes;
  return out;
}

}  // namespace harmonia::bbd
