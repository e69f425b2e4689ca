#pragma once
/// @file A buffer node's store: the data clients wrote, held on the node's device in append-only,
/// checksummed logs (the staging log format of libharmonia, docs/staging-library.md) until it
/// drains to the PFS, with capacity accounting and reads of held data; and the copies staged in
/// for read phases. Thread-safe: one mutex for the store's tables, one per file for its logs, no
/// lock held while a write's bytes are copied into the log, and no lock held across a drain's
/// I/O but the drained file's own.
///
/// Held data follows the file, not its name (docs/buffer-nodes.md, "Data follows the file"): at
/// the first write of a file the node opens the PFS file once, as its writer, and keeps that
/// descriptor; drains write through it. A file renamed meanwhile receives its bytes under its new
/// name; a file deleted meanwhile never comes back (its bytes go to the unlinked inode, which
/// vanishes with the last descriptor). After a restart the node finds each file again by its file
/// handle (name_to_handle_at), or, where the node may not open handles, by its name and inode.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/requests/request_scheduler.hpp"
#include "storage/fences.hpp"

namespace harmonia::bbd {

enum class Status { Ok, Full, NotHeld, Invalid, Error, Forbidden };

/// Whom a request acts for (docs/security.md, "Identity"). A file's data held on the node
/// belongs to the user whose write created its log: only that user, or an administrator, may
/// write more of it, read it or drain it. The PFS file is opened with that user's file-system
/// identity, and drains write as that user.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  bool admin = false;
  /// The node's own user, with every right (tests, and requests with no identity when the node
  /// runs with --auth none).
  static Caller node();
};

/// A file as a request names it: its name relative to the PFS root when the client opened it,
/// and its inode as the client's fstat saw it. With an inode the node holds the data of that
/// very file whatever it is called now; without one (0: harmonia-bbctl, tests) the name decides,
/// and the first write creates the file if it is missing.
struct FileRef {
  std::string name;
  std::uint64_t inode = 0;
  /// The client's file handle (name_to_handle_at), or "": a node that may open handles finds
  /// the file by it when it was renamed or deleted before the first write reached the node.
  std::string handle;
  FileRef(std::string file, std::uint64_t ino = 0, std::string file_handle = {})
      : name(std::move(file)), inode(ino), handle(std::move(file_handle)) {}
  FileRef(const char* file) : name(file) {}
};

/// A file the node holds written data of, as the scheduler learns it (control.proto HeldFile).
struct HeldFileState {
  std::uint64_t inode = 0;
  std::string name;
  std::uint64_t end = 0;      ///< the largest offset + length held
  std::int64_t mtime_ns = 0;  ///< when its last write arrived
  uid_t uid = 0;
  std::string handle;  ///< its file handle, "" where the node has none
};

/// What changed in the files held since the last look (Store::take_file_changes).
struct HeldFileChanges {
  std::vector<HeldFileState> held;      ///< new or changed (all of them, when asked for all)
  std::vector<std::uint64_t> released;  ///< no longer held
};

/// A PFS file as fstat shows it (bb.proto FileIdentity): a staged-in copy is served only to
/// readers who see the file the copy was made of.
struct FileIdentity {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// One stage-in of a read phase (control.proto StageIn) as the store copies it: whose identity
/// reads the PFS files, and which stripes of each file fall on this node (the stripes k, of
/// `stripe_bytes` each, with k % stripe_count == stripe_index).
struct StageSpec {
  std::string key;  ///< names the stage-in (the monitor's job and phase)
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint64_t stripe_bytes = 0;
  std::uint32_t stripe_index = 0, stripe_count = 0;
};

/// Whose data of a file the node holds, for log lines about it.
struct Writer {
  std::string job;  ///< the writer's job ("" when it named none)
  uid_t uid = 0;    ///< the user whose data it is
};

struct StoreStats {
  /// `used` counts written data (the logs) and staged-in copies alike.
  std::uint64_t capacity = 0, used = 0, drained = 0, received = 0;
  std::uint32_t files = 0;
  bool draining = false;
  /// Bytes held, and drained since the node started, per writer's job ("" when it named none);
  /// a log recovered after a crash keeps its job. A job that holds nothing and drained nothing
  /// for 10 minutes is left out of `drained_by_job` (and counts from zero if it comes back).
  std::map<std::string, std::uint64_t> held_by_job, drained_by_job;
  /// Bytes of staged-in copies (in `used`, never in `held_by_job`).
  std::uint64_t staged = 0;
  /// Bytes read from staged-in copies since the node started.
  std::uint64_t staged_read = 0;
  /// The staged-in copies held, per stage-in key: bytes per file (never in `held_by_job`).
  std::map<std::string, std::map<std::string, std::uint64_t>> staged_by_key;
  /// Bytes recovered after a restart whose file the node could not find again (renamed while
  /// the node was down, and the node may not open file handles): held, never drained, reported.
  std::uint64_t orphaned = 0;
};

class Store {
 public:
  /// How a drain copies from the device to the PFS: copy_file_range, else splice through a pipe
  /// (both in the kernel; faster than writing from a mapping, docs/benchmarks.md), else from a
  /// mapping of the log; each is used until the kernel refuses it once.
  enum class KernelCopy { Range, Splice, None };

  /// `device`: the node's directory for logs (recovered at once: logs left by a previous run are
  /// indexed again); `pfs_root`: where drained files go; `capacity`: bytes held at most.
  /// Throws std::runtime_error naming a directory that cannot be used.
  /// `drain_scheduler`: the request scheduler (core/requests) that picks which file drains next.
  Store(std::string device, std::string pfs_root, std::uint64_t capacity,
        std::string drain_scheduler = "fifo");
  ~Store();

  /// Appends a write; Full when it does not fit (in capacity, on the device, or in the node's
  /// descriptors), Invalid for a bad name, a name whose PFS path has a symbolic link on the way,
  /// a file that is not the one `file.inode` names (renamed or replaced since the client opened
  /// it), a file on another file system than the PFS root, or an end past the largest file
  /// offset. The data is in the log (the page cache) when Ok returns (on the device with
  /// sync_writes). Forbidden when the file's data belongs to another user, or the PFS refuses
  /// the caller the file.
  Status write(const FileRef& file, std::uint64_t offset, std::string_view data,
               const std::string& job, std::string& why, const Caller& caller = Caller::node());
  /// The range when the node holds all of it (later writes win), else NotHeld; Forbidden when
  /// it belongs to another user.
  Status read(const FileRef& file, std::uint64_t offset, std::uint64_t length, std::string& out,
              std::string& why, const Caller& caller = Caller::node());
  /// A read of a staged-in copy (docs/buffer-nodes.md, "Stage-in"): served only when the node
  /// holds no written data of the file, a copy of it was made of a file with `identity`, for
  /// the caller (or the caller is an administrator), and the range lies within the file and
  /// within this node's stripes of it; else NotHeld.
  Status read_staged(const std::string& file, std::uint64_t offset, std::uint64_t length,
                     const FileIdentity& identity, std::string& out, std::string& why,
                     const Caller& caller = Caller::node());
  /// Copies this node's stripes of the PFS file `file` into a copy kept for `spec.key`: opened
  /// beneath the PFS root with no link followed, with the file-system identity of spec.uid
  /// (and gid), charged to the capacity, never drained. The file must be regular, unchanged
  /// from before the copy to after it (fstat: size, mtime, ctime, inode), its ctime at least
  /// 1 s older than the copy's start, and the copy must fit; else no copy is kept and `why`
  /// says why. `keep_going` is asked between pieces: false abandons the copy. `bytes`: the
  /// bytes copied. A copy of the same file for the same key is replaced.
  Status stage_in(const StageSpec& spec, const std::string& file,
                  const std::function<bool()>& keep_going, std::uint64_t& bytes, std::string& why);
  /// Frees every copy kept for `key`.
  void drop_stage_in(const std::string& key);
  /// Writes every record of `file` (all files when its name is empty) to the PFS in order,
  /// syncs it, and frees the logs. Error when the PFS fails: what is not drained stays held.
  /// Forbidden for a file of another user; all files, for a caller who is no administrator:
  /// the caller's own. Writes of the file meanwhile are not held up (they go to a new log).
  Status drain(const FileRef& file, std::string& why, const Caller& caller = Caller::node());
  /// Drains the files of `jobs` (and those recovered after a crash) the drain scheduler
  /// dispatches next; NotHeld when there is none. `file` names the first one drained, or on
  /// Error the one that failed (with `why`). The
  /// scheduler lives as long as the store: a file is queued once it may drain, and its state
  /// (windows, quanta, history) carries from one call to the next.
  Status drain_next(const std::set<std::string>& jobs, std::string& file, std::string& why);
  /// Called after every write the store took (the node's drains wait for work, not for time).
  void on_write(std::function<void()> callback) { on_write_ = std::move(callback); }
  /// Called with a write's file offset once its record's bytes are copied into the log (or
  /// failed to be), before the record is committed: tests hold writes there.
  void on_copied(std::function<void(std::uint64_t offset)> callback) {
    on_copied_ = std::move(callback);
  }
  /// From now on a write is acknowledged only once its record is on the device (fdatasync of
  /// the log): it then survives a power loss, not only a killed node.
  void sync_writes() { sync_writes_ = true; }

  /// One snapshot of everything.
  StoreStats stats();
  /// Whether the node holds written data of `file` it can drain (not an orphan).
  bool holds(const FileRef& file);
  /// Whose data of `file` the node holds (not an orphan); nullopt when it holds none.
  std::optional<Writer> writer_of(const FileRef& file);
  /// Files with data held (by their latest name), and their bytes.
  std::map<std::string, std::uint64_t> held();
  /// The held files that changed since the last call (every held file when `all`), and those
  /// released since: what the scheduler must learn.
  HeldFileChanges take_file_changes(bool all);

  /// The node's address as clients know it: from now on drains take its fence lock and skip
  /// the ranges clients fenced (docs/buffer-nodes.md, "Fences"). Drops stale fences.
  void set_fence_node(const std::string& node);
  /// Deletes the fences of files the node holds no log of (they can cover nothing here).
  void drop_stale_fences();

 private:
  struct Segment;
  struct Log;
  struct Copy;
  using LogPtr = std::shared_ptr<Log>;
  /// Frees the copies of `file` (every key); the store's mutex held.
  void drop_copies_locked(const std::string& file);
  /// Deletes the copy's file and gives back its room (it leaves copies_ next); mutex held.
  void free_copy(const Copy& copy);
  /// The log of `file`, or null; the store's mutex held.
  LogPtr find_locked(const FileRef& file);
  /// The PFS file of `handle` (a FileRef's) opened for writing as `caller`, when this node may
  /// open handles (CAP_DAC_READ_SEARCH), the file is the caller's own (or the caller an
  /// administrator), regular, on the PFS root's file system and has `inode`; else -1.
  int open_by_handle(const std::string& handle, std::uint64_t inode, const Caller& caller) const;
  /// Opens the PFS file `file` for writing as `caller`: by its handle when open_by_handle can,
  /// else by its name, beneath the root with no link followed (created when it is known by name
  /// only and missing); -1 with `why` and `status` set.
  int open_target(const FileRef& file, const Caller& caller, std::string& why,
                  Status& status) const;
  /// The log of `file`, made (with its PFS file opened as `caller`) when there is none yet; null
  /// with `why` and `status` set.
  LogPtr log_for(const FileRef& file, const std::string& job, const Caller& caller,
                 std::string& why, Status& status);
  /// A new log segment on the device for `log` (its mutex held), its header naming the file
  /// `name`; null with `why` set.
  std::unique_ptr<Segment> new_segment(const Log& log, const std::string& name, std::string& why);
  /// Drains every segment `log` has now to its PFS file (writes meanwhile go to a new segment).
  Status drain_log(const LogPtr& log, std::string& why);
  /// Writes the records of `segments` to `target` in order, skipping `fenced` ranges.
  bool copy_records(const std::vector<Segment*>& segments, int target,
                    const std::vector<storage::fences::Range>& fenced);
  /// Recovery: indexes the logs a previous run left, grouped by file, and finds each file again.
  void recover();
  /// The fence lock of this node, or -1 (no fence node set, or the lock failed: reported once).
  int lock_fences();

  std::string device_, pfs_root_, drain_scheduler_;
  int device_fd_ = -1, pfs_fd_ = -1;  ///< the two directories, everything opened beneath them
  int mount_fd_ = -1;     ///< the PFS root again, as open_by_handle_at takes it (no O_PATH)
  dev_t pfs_device_ = 0;  ///< the PFS root's file system: files elsewhere are refused
  int stage_fd_ = -1;     ///< DEVICE/stage-in: the copies, emptied at start
  std::uint64_t capacity_;
  /// Guards the tables and counters below; never held across I/O on the PFS or a log. Taken
  /// before a file's lock (Log::mutex), never while one is held.
  std::mutex mutex_;
  std::map<std::uint64_t, LogPtr> logs_;  ///< by the PFS file's inode
  /// Staged-in copies by (file, key).
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Copy>> copies_;
  /// Files being copied now: copies running, and writes of the file since the first began (a
  /// copy that saw a write is not kept: written data wins).
  struct Copying {
    unsigned running = 0;
    std::uint64_t writes = 0;
  };
  std::map<std::string, Copying> copying_;
  std::uint64_t staged_ = 0, staged_read_ = 0, next_copy_ = 0;
  std::uint64_t used_ = 0, drained_ = 0, received_ = 0;
  /// Numbers segments (their order of creation) and logs; taken with or without mutex_.
  std::atomic<std::uint64_t> next_log_{0};
  struct Drained {
    std::uint64_t bytes = 0;
    std::chrono::steady_clock::time_point at;  ///< the last drain
  };
  std::map<std::string, Drained> drained_by_job_;
  std::atomic<unsigned> draining_{0};
  std::string fence_node_;
  std::atomic<bool> fence_warned_{false};
  /// Files (by inode) whose held state changed since take_file_changes.
  std::set<std::uint64_t> file_changes_;
  std::function<void()> on_write_;
  std::function<void(std::uint64_t)> on_copied_;
  /// The drain scheduler (drain_next), and the files queued in it by request id; guarded by
  /// queue_mutex_ (taken before mutex_).
  std::mutex queue_mutex_;
  std::unique_ptr<core::requests::RequestScheduler> queue_;
  std::map<core::requests::RequestId, std::weak_ptr<Log>> queued_;
  std::set<std::uint64_t> queued_logs_;         ///< Log::created of the files queued
  std::map<std::string, core::AppId> job_ids_;  ///< the scheduler's application of each job
  core::requests::RequestId next_request_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<KernelCopy> kernel_copy_{KernelCopy::Range};
  bool sync_writes_ = false;

  /// Closes the descriptors of drained segments (already unlinked) on a thread of its own: the
  /// last close frees the segment's pages and blocks, which took about a sixth of a drain when
  /// done before its reply.
  class Reclaimer {
   public:
    Reclaimer();
    ~Reclaimer();
    Reclaimer(const Reclaimer&) = delete;
    Reclaimer& operator=(const Reclaimer&) = delete;
    /// Closes `fd` soon, on the reclaimer's thread.
    void close_later(int fd);

   private:
    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<int> pending_;
    bool stopping_ = false;
    std::thread thread_;
  };
  Reclaimer reclaimer_;  ///< last member: joined (every pending descriptor closed) first
};

}  // namespace harmonia::bbd
