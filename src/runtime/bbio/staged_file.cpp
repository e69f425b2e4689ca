#include "runtime/bbio/staged_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <set>

#include "core/requests/registry.hpp"
#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/phases.hpp"
#include "storage/log_format.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio {

using storage::kLogSuffix;
using storage::log_header_size;
using storage::pwritev_all;
using storage::real;
using storage::record_checksum;
using storage::RecordHeader;
using storage::write_log_header;

namespace {
std::atomic<size_t> staged_in_process{0};  // staged_bytes_ summed over the files
}  // namespace

size_t staged_total() { return staged_in_process.load(std::memory_order_relaxed); }

namespace {

constexpr size_t kMaxBlock = 8UL << 20;      // RAM staging allocates in blocks of at most this
constexpr size_t kMaxFlushRun = 64UL << 20;  // bytes one flush pwritev may carry

size_t total_length(const struct iovec* iov, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  return total;
}

std::string log_name(const std::string& dir) {
  static std::atomic<unsigned> sequence{0};
  char host[64] = "host";
  gethostname(host, sizeof(host) - 1);
  return dir + "/" + host + "-" + std::to_string(getpid()) + "-" + std::to_string(sequence++) +
         kLogSuffix;
}

}  // namespace

std::unique_ptr<StagedFile> StagedFile::create(int fd, const std::string& path, int flags,
                                               const Config& config, std::string& error) {
  std::unique_ptr<StagedFile> file(new StagedFile());
  file->path_ = path;
  file->buffer_file_.name = buffers::relative_name(path);
  file->append_ = (flags & O_APPEND) != 0;
  file->readable_ = (flags & O_ACCMODE) != O_WRONLY;
  file->capacity_ = config.file_capacity;
  file->node_wait_ = config.node_wait;
  file->small_file_ = config.small_file;
  file->flush_scheduler_ = config.flush_scheduler;
  file->flush_options_ = config.flush_options;
  file->block_size_ = std::min(kMaxBlock, config.file_capacity);
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0) {
    error = path + ": fstat: " + std::strerror(errno);
    return nullptr;
  }
  file->size_ = st.st_size;
  file->device_ = st.st_dev;
  file->inode_ = st.st_ino;
  file->buffer_file_.inode = st.st_ino;
  // A buffer node opens the file as this process's user, as an open by name would: a file this
  // descriptor may write but its user may not open for writing (created read-only, say) is
  // staged here instead.
  if (!file->buffer_file_.name.empty() && !buffers::user_may_open_for_writing(fd))
    file->buffer_file_.name.clear();
  // Appends land at the end of the file as it is when they reach it, whoever else appended or
  // truncated meanwhile; a node holds bytes at the offsets they were given. An O_APPEND file is
  // staged here, and its flush appends.
  if (file->append_) file->buffer_file_.name.clear();
  if (!file->buffer_file_.name.empty()) file->buffer_file_.handle = buffers::handle_of(fd);
  file->position_ = real().lseek64(fd, 0, SEEK_CUR);
  file->fd_ = duplicate_above_program(fd);
  if (file->fd_ < 0) {
    error = path + ": cannot duplicate its descriptor: " + std::strerror(errno);
    return nullptr;
  }
  file->opened_path_ = path;
  if (config.stage_dir) {
    file->log_path_ = log_name(*config.stage_dir);
    file->log_fd_ = above_program(
        real().open(file->log_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    // The file's identity follows the header: recovery writes to this very file, found by its
    // handle or checked by its inode, never to another that took its name.
    const uint64_t identity =
        file->log_fd_ < 0 || !write_log_header(file->log_fd_, path)
            ? 0
            : storage::append_name_record(
                  file->log_fd_, log_header_size(path), storage::NameRecord::Identity,
                  storage::identity_data(st.st_dev, st.st_ino, buffers::handle_of(fd)));
    if (identity == 0) {
      error = file->log_path_ + ": cannot create the staging log: " + std::strerror(errno);
      return nullptr;  // the destructor closes and removes what was created
    }
    file->log_start_ = file->log_end_ = log_header_size(path) + identity;
  }
  return file;
}

void StagedFile::release() {
  const int kept = release_keeping_descriptor();
  if (kept >= 0) close_kept(kept);
}

int StagedFile::release_keeping_descriptor() {
  released_ = true;
  const int kept = fd_;
  if (log_fd_ >= 0) close_kept(log_fd_);
  // Only an empty log may go: anything left in it is data recovery must still replay.
  if (!log_path_.empty() && entries_.empty()) real().unlink(log_path_.c_str());
  fd_ = log_fd_ = -1;
  log_path_.clear();
  staged_in_process -= staged_bytes_;  // what stays in the log is recovery's now
  staged_bytes_ = 0;
  blocks_.clear();
  return kept;
}

void StagedFile::held_back(off64_t offset, size_t total) {
  size_ = std::max(size_, offset + static_cast<off64_t>(total));
  clock_gettime(CLOCK_REALTIME_COARSE, &last_write_);
  note_io(path_, total, true);
}

void StagedFile::overlay(struct statx& st) const {
  if (!pending()) return;
  st.stx_size = std::max<std::uint64_t>(st.stx_size, static_cast<std::uint64_t>(size_));
  const auto stamp = [&](struct statx_timestamp& t) {
    if (later(last_write_, timespec{t.tv_sec, static_cast<long>(t.tv_nsec)})) {
      t.tv_sec = last_write_.tv_sec;
      t.tv_nsec = static_cast<std::uint32_t>(last_write_.tv_nsec);
    }
  };
  if (st.stx_mask & STATX_MTIME) stamp(st.stx_mtime);
  if (st.stx_mask & STATX_CTIME) stamp(st.stx_ctime);
}

ssize_t StagedFile::write(const struct iovec* iov, int count) {
  const off64_t at = append_ ? size_ : position_;
  const ssize_t n = stage(iov, count, at);
  if (n > 0) position_ = at + n;
  return n;
}

ssize_t StagedFile::write_at(const struct iovec* iov, int count, off64_t offset) {
  if (offset < 0) {
    errno = EINVAL;
    return -1;
  }
  // Linux appends a pwrite to a file opened with O_APPEND, whatever its offset.
  return stage(iov, count, append_ ? size_ : offset);
}

ssize_t StagedFile::write_direct(const struct iovec* iov, int count, off64_t offset) {
  if (flush() != 0) return -1;
  drain_for_write();
  buffers::fence(buffer_file_, offset, total_length(iov, count));
  const ssize_t n = pwritev_all(fd_, iov, count, offset);
  if (n > 0) {
    size_ = std::max(size_, offset + n);
    note_io(path_, static_cast<size_t>(n), true);
  }
  return n;
}

const StagedFile::WritePlan& StagedFile::write_plan() {
  if (plan_.decided && plan_.directive == agent::directive_version()) return plan_;
  agent::Directive directive = agent::directive();
  plan_.decided = true;
  plan_.directive = directive.version;
  plan_.nodes = buffer_file_.name.empty() || directive.grant.nodes.empty()
                    ? nullptr
                    : std::make_shared<const agent::Grant>(std::move(directive.grant));
  plan_.through = write_through_ || !directive.stage;
  plan_.flush_allowed = directive.flush_allowed;
  return plan_;
}

ssize_t StagedFile::stage(const struct iovec* iov, int count, off64_t offset) {
  const size_t total = total_length(iov, count);
  if (total == 0) return 0;
  agent::before_write(total);
  if (!buffer_file_.name.empty() && !write_through_) {
    if (total < kGather && gather(iov, count, offset, total)) return static_cast<ssize_t>(total);
    if (push_gathered() != 0) return -1;  // what was gathered lands before this write
    if (write_to_buffers(iov, count, offset, total)) return static_cast<ssize_t>(total);
  }
  return stage_here(iov, count, offset, total);
}

bool StagedFile::gather(const struct iovec* iov, int count, off64_t offset, size_t total) {
  if (!gathered_.empty() && offset != gathered_at_ + static_cast<off64_t>(gathered_.size()) &&
      push_gathered() != 0)
    return false;
  if (gathered_.empty()) {
    // A new run only while the file goes to the nodes (it went there, or a phase is granted).
    if (buffer_nodes_.empty() && !write_plan().nodes) return false;
    gathered_at_ = offset;
    gathered_.reserve(kGather);
  }
  for (int i = 0; i < count; ++i)
    gathered_.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
  held_back(offset, total);
  // A full stripe goes at once; an error there is the next call's (its bytes stay gathered).
  if (gathered_.size() >= kGather) (void)push_gathered();
  return true;
}

int StagedFile::push_gathered() {
  if (gathered_.empty()) return 0;
  std::string run;
  run.swap(gathered_);  // calls below that flush find nothing gathered
  const iovec one{run.data(), run.size()};
  if (write_to_buffers(&one, 1, gathered_at_, run.size()) ||
      stage_here(&one, 1, gathered_at_, run.size()) >= 0)
    return 0;
  const int saved = errno;
  gathered_.swap(run);  // kept for the next try, or for the close to report
  errno = saved;
  return -1;
}

ssize_t StagedFile::stage_here(const struct iovec* iov, int count, off64_t offset, size_t total) {
  // Not on the nodes: what they hold of the file lands first, or their older bytes would land
  // over these when they drain (and reads would find them there). A lost node is not waited
  // for: this write is fenced against its older bytes.
  drain_for_write();
  if (write_through_) return write_direct(iov, count, offset);
  // The scheduler daemon says write through: do, once what is staged may go first.
  const WritePlan& plan = write_plan();
  if (plan.through && (entries_.empty() || plan.flush_allowed))
    return write_direct(iov, count, offset);
  if (staged_bytes_ + total > capacity_) {
    // Full: flush, then stage; a write larger than the whole capacity goes straight through.
    if (flush() != 0) return -1;
    if (total > capacity_) return write_direct(iov, count, offset);
  }
  if (log_fd_ >= 0) {
    if (!append_to_log(iov, count, total, offset)) {
      report(log_path_ + ": staging log write failed (" + std::strerror(errno) +
             "); writing through to " + path_);
      write_through();
      return write_direct(iov, count, offset);
    }
  } else {
    append_to_memory(iov, count, offset);
  }
  staged_bytes_ += total;
  staged_in_process += total;
  held_back(offset, total);
  return static_cast<ssize_t>(total);
}

bool StagedFile::write_to_buffers(const struct iovec* iov, int count, off64_t offset,
                                  size_t total) {
  // Held here: a flush below may re-decide the plan.
  const std::shared_ptr<const agent::Grant> granted = write_plan().nodes;
  if (!granted) return false;
  const agent::Grant& grant = *granted;
  // What is staged here, and what other nodes hold, lands first: the file ends with the bytes
  // written last whatever the order of drains.
  if (flush() != 0) return false;
  if (!buffer_nodes_.empty() && (buffer_nodes_ != grant.nodes || buffer_stripe_ != grant.stripe))
    drain_for_write();
  if (buffer_nodes_.empty()) {
    buffer_nodes_ = grant.nodes;
    buffer_stripe_ = grant.stripe;
  }
  if (!buffers::write(buffer_file_, grant.job, iov, count, offset, grant.nodes, grant.stripe))
    return false;
  held_back(offset, total);
  return true;
}

void StagedFile::drain_for_write() {
  if (!buffer_file_.name.empty() && !buffer_nodes_.empty())
    (void)buffers::drain(buffer_file_, std::move(buffer_nodes_), 0, "other-nodes");
  buffer_nodes_.clear();
  buffer_stripe_ = 0;
}

bool StagedFile::drain_needed(std::vector<std::string> nodes, const char* reason) {
  buffer_nodes_.clear();
  buffer_stripe_ = 0;
  return buffer_file_.name.empty() ||
         buffers::drained_or_unavailable(path_, buffer_file_, std::move(nodes), node_wait_, reason);
}

ssize_t StagedFile::read_held(const struct iovec* iov, int count, off64_t offset) {
  if (!readable_) {  // what the kernel answers a read of a write-only descriptor
    errno = EBADF;
    return -1;
  }
  // Bytes staged here would have to be merged in: then the file is settled instead.
  if (push_gathered() != 0 || buffer_nodes_.empty() || !entries_.empty()) return kNotHeld;
  const off64_t at = offset < 0 ? position_ : offset;
  const size_t asked = total_length(iov, count);
  // Larger reads go to the PFS: the bytes pass through one buffer here.
  if (asked == 0 || asked > kMaxHeldRead) return kNotHeld;
  if (at >= size_) {
    // At or past the end this process knows of: the end of the file, unless another process
    // wrote further (then the PFS answers).
    struct stat64 st {};
    return real().fstat64(fd_, &st) == 0 && st.st_size <= at ? 0 : kNotHeld;
  }
  const size_t length = std::min<size_t>(asked, static_cast<size_t>(size_ - at));
  std::string data;
  try {
    if (!buffers::read(buffer_file_, at, length, buffer_nodes_, buffer_stripe_, data))
      return kNotHeld;
  } catch (const std::bad_alloc&) {
    return kNotHeld;
  }
  size_t done = 0;
  for (int i = 0; i < count && done < length; ++i) {
    const size_t take = std::min(iov[i].iov_len, length - done);
    std::memcpy(iov[i].iov_base, data.data() + done, take);
    done += take;
  }
  if (offset < 0) position_ = at + static_cast<off64_t>(length);
  return static_cast<ssize_t>(length);
}

int StagedFile::settle() {
  if (write_small_file() != 0) return -1;  // cheaper than through a node and back
  if (flush() != 0) return -1;
  return drain_needed(std::move(buffer_nodes_), "settle") ? 0 : -1;
}

int StagedFile::write_small_file() {
  // Nothing of the file went to a node (in this process: sent() of another descriptor is
  // fenced below) and nothing is staged here: the gathered run is the file's whole news.
  if (gathered_.empty() || gathered_.size() > small_file_ || !buffer_nodes_.empty() ||
      !entries_.empty())
    return 0;
  std::string run;
  run.swap(gathered_);
  const iovec one{run.data(), run.size()};
  buffers::fence(buffer_file_, gathered_at_, run.size());
  if (pwritev_all(fd_, &one, 1, gathered_at_) < 0) {
    const int saved = errno;
    gathered_.swap(run);
    errno = saved;
    return -1;
  }
  return 0;
}

int StagedFile::close_flush() {
  // A small file costs a node's round trip, the publish and a drain later on the nodes, more
  // than its one write to the PFS: it is written there, as plain I/O would have.
  if (write_small_file() != 0) return -1;
  if (flush() != 0) return -1;
  if (buffer_file_.name.empty()) return 0;
  // Close-to-open: after the close, every process finds the bytes, through the scheduler that
  // now knows what the nodes hold of the file (they publish it), or in the PFS file (drained
  // here when a node cannot publish). Lost nodes must come back and drain it, or the close
  // reports that the file lacks bytes. The file is released after this: its stripe map is not
  // needed any more.
  if (!buffers::publish(buffer_file_))
    return drain_needed(std::move(buffer_nodes_), "close") ? 0 : -1;
  return drain_needed({}, "node-lost") ? 0 : -1;
}

bool StagedFile::append_to_log(const struct iovec* iov, int count, size_t total, off64_t offset) {
  RecordHeader header;
  header.offset = static_cast<uint64_t>(offset);
  header.length = total;
  // The checksum covers the data, which may be scattered: gather it through a temporary buffer
  // only when there is more than one piece.
  std::vector<char> gathered;
  const char* data = static_cast<const char*>(iov[0].iov_base);
  if (count > 1) {
    gathered.reserve(total);
    for (int i = 0; i < count; ++i)
      gathered.insert(gathered.end(), static_cast<const char*>(iov[i].iov_base),
                      static_cast<const char*>(iov[i].iov_base) + iov[i].iov_len);
    data = gathered.data();
  }
  header.checksum = record_checksum(header, data);
  struct iovec out[2] = {{&header, sizeof(header)}, {const_cast<char*>(data), total}};
  if (pwritev_all(log_fd_, out, 2, static_cast<off64_t>(log_end_)) < 0) {
    // Cut off the partial record so that the log stays a sequence of complete ones.
    (void)real().ftruncate64(log_fd_, static_cast<off64_t>(log_end_));
    return false;
  }
  entries_.push_back({offset, total, nullptr, log_end_ + sizeof(header)});
  log_end_ += sizeof(header) + total;
  return true;
}

void StagedFile::append_to_memory(const struct iovec* iov, int count, off64_t offset) {
  for (int i = 0; i < count; ++i) {
    const char* src = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      if (block_ < blocks_.size() && block_used_ == block_size_) {
        ++block_;
        block_used_ = 0;
      }
      if (block_ == blocks_.size()) blocks_.emplace_back(new char[block_size_]);
      const size_t take = std::min(left, block_size_ - block_used_);
      char* dst = blocks_[block_].get() + block_used_;
      std::memcpy(dst, src, take);
      // Contiguous in the file and in memory: extend the last entry (the paper's merging).
      if (!entries_.empty() &&
          entries_.back().offset + static_cast<off64_t>(entries_.back().length) == offset &&
          entries_.back().data + entries_.back().length == dst)
        entries_.back().length += take;
      else
        entries_.push_back({offset, take, dst, 0});
      block_used_ += take;
      src += take;
      offset += static_cast<off64_t>(take);
      left -= take;
    }
  }
}

int StagedFile::flush() {
  if (push_gathered() != 0) return -1;
  if (entries_.empty()) {
    (void)real().lseek64(fd_, position_, SEEK_SET);
    return 0;
  }
  agent::before_flush({path_, device_, inode_});
  if (on_flush && !in_callback_) {
    in_callback_ = true;
    on_flush(fd_);
    in_callback_ = false;
  }
  if (!flush_scheduler_.empty()) {
    int result = 0;
    if (flush_scheduled(result)) return result;
  }
  size_t done = 0;
  while (done < entries_.size()) {
    // One run: entries that continue each other in the file, written with one pwritev.
    std::vector<size_t> run;
    size_t run_bytes = 0;
    while (done + run.size() < entries_.size() && run.size() < IOV_MAX &&
           run_bytes < kMaxFlushRun &&
           entries_[done + run.size()].offset ==
               entries_[done].offset + static_cast<off64_t>(run_bytes)) {
      run_bytes += entries_[done + run.size()].length;
      run.push_back(done + run.size());
    }
    if (!write_entries(run)) {
      entries_.erase(entries_.begin(), entries_.begin() + static_cast<long>(done));
      return -1;
    }
    done += run.size();
  }
  flushed();
  return 0;
}

bool StagedFile::write_entries(const std::vector<size_t>& which) {
  std::vector<struct iovec> iov;
  std::vector<char> bounce;
  if (log_fd_ >= 0) {
    size_t total = 0;
    for (size_t k : which) total += entries_[k].length;
    bounce.resize(total);
    size_t at = 0;
    for (size_t k : which) {
      size_t got = 0;
      while (got < entries_[k].length) {
        const ssize_t n =
            real().pread64(log_fd_, bounce.data() + at + got, entries_[k].length - got,
                           static_cast<off64_t>(entries_[k].log_at + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          if (n == 0) errno = EIO;
          return false;
        }
        got += static_cast<size_t>(n);
      }
      at += entries_[k].length;
    }
    iov.push_back({bounce.data(), total});
  } else {
    for (size_t k : which) iov.push_back({const_cast<char*>(entries_[k].data), entries_[k].length});
  }
  buffers::fence(buffer_file_, entries_[which.front()].offset,
                 total_length(iov.data(), static_cast<int>(iov.size())));
  return pwritev_all(fd_, iov.data(), static_cast<int>(iov.size()),
                     entries_[which.front()].offset) >= 0;
}

bool StagedFile::flush_scheduled(int& result) {
  // Reordering is safe only when no two entries overlap: then the file ends the same whatever
  // the order. Otherwise the later write must land last, so the plain order is kept.
  std::vector<std::pair<off64_t, off64_t>> ranges;
  for (const auto& e : entries_)
    ranges.emplace_back(e.offset, e.offset + static_cast<off64_t>(e.length));
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].first < ranges[k - 1].second) return false;

  namespace req = harmonia::core::requests;
  const auto scheduler = req::make_request_scheduler(flush_scheduler_, flush_options_);
  for (size_t k = 0; k < entries_.size(); ++k)
    scheduler->enqueue({k + 1, 1, static_cast<std::uint64_t>(entries_[k].offset),
                        entries_[k].length, core::Op::Write, 0, 0, 0});
  std::vector<bool> written(entries_.size(), false);
  req::Time now = 0;
  while (scheduler->queued() > 0) {
    req::Batch batch = scheduler->dequeue(now);
    for (const auto& d : batch.dispatches) {
      // An aggregate's parts are contiguous in offset order: one pwritev.
      std::vector<size_t> which;
      for (const auto& part : d.parts) which.push_back(static_cast<size_t>(part.id - 1));
      bool ok = which.size() <= static_cast<size_t>(IOV_MAX) && write_entries(which);
      if (!ok && which.size() > static_cast<size_t>(IOV_MAX)) {
        ok = true;
        for (size_t k : which) ok = ok && write_entries({k});
      }
      if (!ok) {
        // Keep what did not reach the file, in its order, for a later flush or recovery.
        const int saved = errno;
        std::vector<Entry> left;
        for (size_t k = 0; k < entries_.size(); ++k)
          if (!written[k]) left.push_back(entries_[k]);
        entries_.swap(left);
        errno = saved;
        result = -1;
        return true;
      }
      for (size_t k : which) written[k] = true;
      for (const auto& part : d.parts) scheduler->release(part.id, 0);
    }
    if (batch.dispatches.empty()) {
      if (batch.retry_at == req::kNever) break;  // cannot happen with requests queued
      now = batch.retry_at;  // a window or quantum: no need to wait for it locally
    }
  }
  for (size_t k = 0; k < entries_.size(); ++k)
    if (!written[k] && !write_entries({k})) {
      result = -1;
      return true;
    }
  flushed();
  result = 0;
  return true;
}

void StagedFile::flushed() {
  entries_.clear();
  staged_in_process -= staged_bytes_;
  staged_bytes_ = 0;
  block_ = block_used_ = 0;
  if (log_fd_ >= 0) {
    // Everything reached the file: the records must not be replayed again.
    (void)real().ftruncate64(log_fd_, static_cast<off64_t>(log_start_));
    log_end_ = log_start_;
    append_name_state();
  }
  (void)real().lseek64(fd_, position_, SEEK_SET);
  agent::after_flush(staged_total());
}

void StagedFile::append_name_state() {
  if (log_fd_ < 0) return;
  // A record that cannot be written leaves recovery with the older name: reported, not fatal
  // (the data still reaches the file at the next flush).
  const auto append = [this](storage::NameRecord kind, const std::string& data) {
    const uint64_t n = storage::append_name_record(log_fd_, log_end_, kind, data);
    if (n == 0)
      report(log_path_ + ": cannot record the rename or deletion of " + path_ + " (" +
             std::strerror(errno) + "); a recovery would use the older name");
    log_end_ += n;
  };
  if (path_ != opened_path_) append(storage::NameRecord::Renamed, path_);
  if (deleted_) append(storage::NameRecord::Unlinked, "");
}

void StagedFile::renamed(const std::string& path) {
  path_ = path;
  if (log_fd_ < 0) return;
  const uint64_t n =
      storage::append_name_record(log_fd_, log_end_, storage::NameRecord::Renamed, path);
  if (n == 0)
    report(log_path_ + ": cannot record the rename of " + opened_path_ + " to " + path + " (" +
           std::strerror(errno) + "); a recovery would use the older name");
  log_end_ += n;
}

bool StagedFile::has_names() const {
  struct stat64 st {};
  return real().fstat64(fd_, &st) != 0 || st.st_nlink > 0;
}

void StagedFile::unlinked() {
  deleted_ = true;
  if (log_fd_ >= 0)
    log_end_ += storage::append_name_record(log_fd_, log_end_, storage::NameRecord::Unlinked, "");
}

off64_t StagedFile::seek(off64_t offset, int whence) {
  off64_t base = 0;
  switch (whence) {
    case SEEK_SET:
      base = 0;
      break;
    case SEEK_CUR:
      base = position_;
      break;
    case SEEK_END:
      base = size_;
      break;
    default:
      // SEEK_DATA, SEEK_HOLE: the file system must hold the data to answer (drained from the
      // buffer nodes too).
      if (settle() != 0) return -1;
      {
        const off64_t at = real().lseek64(fd_, offset, whence);
        if (at >= 0) position_ = at;
        return at;
      }
  }
  if (base + offset < 0) {
    errno = EINVAL;
    return -1;
  }
  position_ = base + offset;
  return position_;
}

void StagedFile::adopt_file_offset() {
  const off64_t at = real().lseek64(fd_, 0, SEEK_CUR);
  if (at >= 0) position_ = at;
  struct stat64 st {};
  // With nothing pending the file's own size is the size (fallocate and truncate may shrink it).
  if (real().fstat64(fd_, &st) == 0)
    size_ = pending() ? std::max(size_, static_cast<off64_t>(st.st_size)) : st.st_size;
}

}  // namespace harmonia::bbio
