#pragma once
// One staged open file description: the writes an application made to it, kept in RAM or in an
// on-disk log until they are flushed to the file, in order.

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "harmonia/bbio.h"
#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/report.hpp"

namespace harmonia::bbio {

class StagedFile {
 public:
  /// Starts staging the open file behind `fd` (a regular file at absolute `path`, opened with
  /// `flags`). Returns nullptr, with `error` set, when staging cannot start (the file is then
  /// used directly).
  static std::unique_ptr<StagedFile> create(int fd, const std::string& path, int flags,
                                            const Config& config, std::string& error);
  ~StagedFile() { release(); }
  /// Closes our descriptor and the log (removing it when empty) and frees staging memory.
  /// Only what could not be flushed stays in the log, for recovery.
  void release();
  /// release(), but our descriptor of the file is handed to the caller instead of closed
  /// (-1 if none): closing any descriptor of a file drops the process's POSIX locks on it, so
  /// a file that leaves staging while the program still has it open keeps ours until the
  /// program closes one of its own.
  int release_keeping_descriptor();
  /// Released: no longer staged (closed, or sent to plain I/O); a thread that waited for the
  /// mutex meanwhile makes its call on the file itself.
  bool released() const { return released_; }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  // All members below must be called with `mutex` held.
  /// write(): at the current position (the end with O_APPEND), advancing it.
  ssize_t write(const struct iovec* iov, int count);
  /// pwrite(): at `offset`, leaving the position alone.
  ssize_t write_at(const struct iovec* iov, int count, off64_t offset);
  off64_t seek(off64_t offset, int whence);
  /// Writes every staged byte to the file, in order, and sets the file offset to the position.
  /// Returns 0, or -1 with errno (the data not yet written stays staged).
  int flush();
  /// flush(), and the file's data on buffer nodes drained to it: before reads, truncation and
  /// anything else that must see the whole file. A node holding some of it that is down is
  /// waited for up to HARMONIA_NODE_WAIT seconds; then -1 with EIO (the file lacks those
  /// bytes: nothing may read it as if whole). Returns 0, or -1 with errno.
  int settle();
  /// flush() at close: 0 means every byte is in the file or on a buffer node that answers now
  /// (one that does not is waited for as by settle()). Returns 0, or -1 with errno.
  int close_flush();
  /// A read served by the buffer nodes holding the file, when they hold all of the range (read
  /// after write, and a "cached" job's reads: docs/buffer-nodes.md): the bytes read, or
  /// kNotHeld (nothing done: the caller settles and reads the file); -1 with EBADF on a
  /// write-only descriptor. `offset` < 0: at the
  /// position, which advances.
  ssize_t read_held(const struct iovec* iov, int count, off64_t offset);
  static constexpr ssize_t kNotHeld = -2;
  static constexpr size_t kMaxHeldRead = 64 << 20;
  /// Re-reads the position from the file offset after a call that moved it (read, lseek).
  void adopt_file_offset();
  /// The file was truncated to `length` (after a flush).
  void truncated(off64_t length) { size_ = length; }
  /// The program renamed the file to `path` (absolute): the log says so, so that recovery
  /// writes to it under its new name.
  void renamed(const std::string& path);
  /// The program deleted the file's last name: the log says so, and recovery replays nothing.
  void unlinked();
  /// Whether the file still has a name (its link count, from fstat).
  bool has_names() const;
  /// Any write from now on goes straight to the file (after what is staged).
  void write_through() {
    write_through_ = true;
    plan_.decided = false;
  }
  size_t staged_bytes() const { return staged_bytes_; }
  const std::string& path() const { return path_; }
  /// The file's identity (device, inode), as fstat saw it when staging started.
  std::pair<dev_t, ino_t> identity() const { return {device_, inode_}; }
  /// A stat of the file as the program must see it: while written bytes are still staged here
  /// or held by buffer nodes, the size it wrote and the times of its last write.
  template <class Stat>
  void overlay(Stat& st) const {
    if (!pending()) return;
    st.st_size = std::max<off64_t>(st.st_size, size_);
    if (later(last_write_, st.st_mtim)) st.st_mtim = last_write_;
    if (later(last_write_, st.st_ctim)) st.st_ctim = last_write_;
  }
  void overlay(struct statx& st) const;

  std::recursive_mutex mutex;
  BBIO_Callback on_flush = nullptr;
  int app_fds = 0;  ///< application descriptors referring to this file; guarded by the registry

 private:
  StagedFile() = default;
  /// Where the file's writes go: to the buffer nodes, through to the file, or staged here (in
  /// RAM or in the log, fixed when staging starts: log_fd_). Decided once, and again only when
  /// the scheduler daemon's directive changes or the file turns to writing through.
  struct WritePlan {
    bool decided = false;
    std::uint64_t directive = 0;  ///< the directive's version it was decided under
    /// The buffer nodes granted to the job's phase, which take the writes first; null: none
    /// (or the file is not under HARMONIA_BUFFER_ROOT).
    std::shared_ptr<const agent::Grant> nodes;
    bool through = false;  ///< writes the nodes do not take go to the file, not staged
    bool flush_allowed = true;
  };
  /// The plan, re-decided when stale: one atomic load per write while the directive holds.
  const WritePlan& write_plan();
  ssize_t stage(const struct iovec* iov, int count, off64_t offset);
  /// stage() here: in RAM, in the log, or through to the file (not on the buffer nodes).
  ssize_t stage_here(const struct iovec* iov, int count, off64_t offset, size_t total);
  /// A small write of a file that goes to buffer nodes, gathered with the ones it continues
  /// into runs of up to kGather bytes, sent when full, when a write does not continue it, and
  /// at every flush; false: not gathered (the caller sends it as it is).
  bool gather(const struct iovec* iov, int count, off64_t offset, size_t total);
  /// Sends the gathered run to the nodes (or stages it here when they do not take it).
  /// Returns 0, or -1 with errno (the run stays gathered).
  int push_gathered();
  /// At close or a settle: writes the gathered run to the file when it is all the file holds
  /// and the nodes never received a byte of it, and it is at most small_file_ bytes. Returns 0
  /// (done, or not such a file), or -1 with errno (the run stays gathered).
  int write_small_file();
  static constexpr size_t kGather = 1 << 20;
  static_assert(Config::kMaxSmallFile <= kGather, "a small file is one gathered run");
  ssize_t write_direct(const struct iovec* iov, int count, off64_t offset);
  /// A write of a granted phase to its buffer nodes; false when it must go through instead.
  bool write_to_buffers(const struct iovec* iov, int count, off64_t offset, size_t total);
  /// Before a write that does not go to the nodes the file is striped over: their bytes of it
  /// land first where they answer; a lost node is not waited for (the write is fenced against
  /// its older bytes). Forgets the stripe map.
  void drain_for_write();
  /// Drains this file's data from `nodes`, and from every node lost since it wrote there,
  /// waiting up to node_wait_ seconds for lost ones to come back; false with EIO (reported)
  /// when some did not. Forgets the stripe map.
  bool drain_needed(std::vector<std::string> nodes, const char* reason);
  bool append_to_log(const struct iovec* iov, int count, size_t total, off64_t offset);
  /// Writes entries [first, last) with one pwritev (their data from RAM or the log).
  bool write_entries(const std::vector<size_t>& which);
  /// flush() through the configured request scheduler; false when the entries overlap (their
  /// order then matters) and the plain flush must run instead. Returns via `result`.
  bool flush_scheduled(int& result);
  /// After every entry reached the file: forget them, empty the log, restore the offset.
  void flushed();
  /// Appends to the log what the program did to the file's name since the log was made
  /// (renamed, deleted): after the log is emptied, so that recovery still knows.
  void append_name_state();
  void append_to_memory(const struct iovec* iov, int count, off64_t offset);
  /// `total` bytes at `offset` were taken (staged, gathered or on the nodes), not yet in the
  /// file: the logical size, the time of the last write and the phase detector learn of them.
  void held_back(off64_t offset, size_t total);
  /// Bytes written that the file itself does not have yet.
  bool pending() const { return !entries_.empty() || !buffer_nodes_.empty() || !gathered_.empty(); }
  static bool later(const timespec& a, const timespec& b) {
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
  }

  struct Entry {
    off64_t offset;
    size_t length;
    const char* data;  // RAM: in the arena
    uint64_t log_at;   // disk: where the data starts in the log
  };

  int fd_ = -1;  ///< our own descriptor for the same open file description
  std::string path_;
  buffers::FileKey buffer_file_;           ///< its name "" when not under HARMONIA_BUFFER_ROOT
  std::vector<std::string> buffer_nodes_;  ///< nodes holding its data (one stripe map)
  std::uint64_t buffer_stripe_ = 0;        ///< bytes per node in turn on buffer_nodes_
  bool append_ = false;
  bool readable_ = true;  ///< opened for reading too (not O_WRONLY)
  bool write_through_ = false;
  WritePlan plan_;
  bool in_callback_ = false;
  size_t capacity_ = 0;
  double node_wait_ = 0;   ///< seconds a read, fsync or close waits for a lost buffer node
  size_t small_file_ = 0;  ///< Config::small_file
  std::string flush_scheduler_;
  std::map<std::string, std::string> flush_options_;
  off64_t position_ = 0;
  off64_t size_ = 0;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  timespec last_write_{};  ///< when the program last wrote a byte not yet in the file
  std::vector<Entry> entries_;
  // Small writes on their way to the buffer nodes: one run, contiguous from gathered_at_.
  std::string gathered_;
  off64_t gathered_at_ = 0;
  size_t staged_bytes_ = 0;
  // RAM staging: blocks reused from one flush to the next.
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_size_ = 0;
  size_t block_ = 0, block_used_ = 0;
  // Disk staging.
  int log_fd_ = -1;
  std::string log_path_;
  uint64_t log_start_ = 0, log_end_ = 0;
  std::string opened_path_;  ///< the path the log's header names
  bool deleted_ = false;     ///< the program deleted the file's last name
  bool released_ = false;
};

/// Bytes staged in this process, over all files.
size_t staged_total();

}  // namespace harmonia::bbio
