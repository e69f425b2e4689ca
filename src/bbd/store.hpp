#pragma once
/// @file A buffer node's store: one append-only, checksummed log per file on the node's device
/// (the staging log format of libharmonia, docs/staging-library.md), with capacity accounting,
/// reads of held data, and drains to the PFS in written order. Thread-safe.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace harmonia::bbd {

enum class Status { Ok, Full, NotHeld, Invalid, Error, Forbidden };

/// Whom a request acts for (docs/security.md, "Identity"). A file's data held on the node
/// belongs to the user whose write created its log: only that user, or an administrator, may
/// write more of it, read it or drain it. The PFS file is opened with its owner's file-system
/// identity, at the first write (created if missing, so the kernel decides whether the user may
/// write it) and at every drain.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  bool admin = false;
  /// The node's own user, with every right (tests, and requests with no identity when the node
  /// runs with --auth none).
  static Caller node();
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
};

class Store {
 public:
  /// `device`: the node's directory for logs (recovered at once: logs left by a previous run are
  /// indexed again); `pfs_root`: where drained files go; `capacity`: bytes held at most.
  /// Throws std::runtime_error naming a directory that cannot be used.
  /// `drain_scheduler`: the request scheduler (core/requests) that picks which file drains next.
  Store(std::string device, std::string pfs_root, std::uint64_t capacity,
        std::string drain_scheduler = "fifo");
  ~Store();

  /// Appends a write; Full when it does not fit (in capacity or on the device), Invalid for a
  /// bad name, a name whose PFS path has a symbolic link on the way (checked at the first write
  /// of the file; drains check again) or an end past the largest file offset. The data is in the
  /// log (the page cache) when Ok returns (on the device with sync_writes).
  /// Forbidden when the file's data belongs to another user, or the PFS refuses the caller
  /// the file.
  Status write(const std::string& file, std::uint64_t offset, std::string_view data,
               const std::string& job, std::string& why, const Caller& caller = Caller::node());
  /// The range when the node holds all of it (later writes win), else NotHeld; Forbidden when
  /// it belongs to another user.
  Status read(const std::string& file, std::uint64_t offset, std::uint64_t length, std::string& out,
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
  /// Writes every record of `file` (all files when empty) to the PFS in order, syncs it, and
  /// frees the log. Error when the PFS fails, or the file's path there is refused (a symbolic
  /// link on the way, not a regular file): what is not drained stays held.
  /// Forbidden for a file of another user; all files, for a caller who is no administrator:
  /// the caller's own.
  Status drain(const std::string& file, std::string& why, const Caller& caller = Caller::node());
  /// Drains one file of `jobs` (or one recovered after a crash), chosen by the drain scheduler;
  /// NotHeld when there is none. `file` names the one drained.
  Status drain_next(const std::set<std::string>& jobs, std::string& file, std::string& why);
  /// From now on a write is acknowledged only once its record is on the device (fdatasync of
  /// the log): it then survives a power loss, not only a killed node.
  void sync_writes() { sync_writes_ = true; }

  /// One snapshot of everything.
  StoreStats stats();
  /// Files with data held, and their bytes.
  std::map<std::string, std::uint64_t> held();

  /// The node's address as clients know it: from now on drains take its fence lock and skip
  /// the ranges clients fenced (docs/buffer-nodes.md, "Fences"). Drops stale fences.
  void set_fence_node(const std::string& node);
  /// Deletes the fences of files the node holds no log of (they can cover nothing here).
  void drop_stale_fences();

 private:
  struct Log;
  struct Copy;
  /// Frees the copies of `file` (every key); the store's mutex held.
  void drop_copies_locked(const std::string& file);
  /// Deletes the copy's file and gives back its room (it leaves copies_ next); mutex held.
  void free_copy(const Copy& copy);
  Log* log_for(const std::string& file, const std::string& job, const Caller& caller,
               std::string& why);
  /// Whether the caller may write the PFS file as its owner: opened (created if missing) with
  /// the caller's file-system identity, beneath the root with no link followed.
  Status may_write(const std::string& file, const Caller& caller, std::string& why) const;
  Status drain_one(const std::string& file, Log& log, std::string& why);
  /// Whether `file` can be drained to: beneath the PFS root with no symbolic link on the way,
  /// and a regular file if it exists; else false and `why` names the path.
  bool drainable(const std::string& file, std::string& why) const;
  /// The fence lock of this node, or -1 (no fence node set, or the lock failed: reported once).
  int lock_fences();

  std::string device_, pfs_root_, drain_scheduler_;
  int device_fd_ = -1, pfs_fd_ = -1;  ///< the two directories, everything opened beneath them
  int stage_fd_ = -1;                 ///< DEVICE/stage-in: the copies, emptied at start
  std::uint64_t capacity_;
  std::mutex mutex_;  ///< guards everything; drains hold it (writes to a draining node wait)
  std::map<std::string, std::unique_ptr<Log>> logs_;
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
  std::uint64_t used_ = 0, drained_ = 0, received_ = 0, next_log_ = 0;
  struct Drained {
    std::uint64_t bytes = 0;
    std::chrono::steady_clock::time_point at;  ///< the last drain
  };
  std::map<std::string, Drained> drained_by_job_;
  bool draining_ = false;
  std::string fence_node_;
  std::atomic<bool> fence_warned_{false};
  std::atomic<bool> kernel_copy_{true};
  bool sync_writes_ = false;  ///< copy_file_range works from the device to the PFS
};

}  // namespace harmonia::bbd
