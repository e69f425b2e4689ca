#pragma once
// The agent: when HARMONIA_SCHEDD names a scheduler daemon, this process registers with it as a
// process of its job, reports its I/O phases (declared with harmonia_io_begin/end, or detected
// from its writes), asks before flushing staged data, and follows the directives it gets:
// stage or write through, flush or wait, pace writes. Without a daemon, or when the daemon is
// gone, everything behaves as plain libharmonia with writes going straight through.
// docs/control.md describes the protocol and the rules.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace harmonia::bbio::agent {

/// What the file layer (the registry of staged files, above the agent) lets the agent do: the
/// agent includes nothing above it, and reaches the staged files only through these, set once
/// when the file layer starts. Unset: nothing is staged (0 bytes, nothing to settle or flush).
struct FileLayer {
  std::size_t (*staged_bytes)() = nullptr;  ///< bytes staged in the process now
  /// Another process is about to open a file: write out what is staged of it here.
  void (*settle_for_reader)(const std::string& path, bool same_host, dev_t device,
                            ino_t inode) = nullptr;
  int (*flush_all)() = nullptr;  ///< write out everything staged (the flusher thread)
};
void set_file_layer(const FileLayer& layer);

/// Whether HARMONIA_SCHEDD is set (read once per process).
bool configured();
/// A staged file, as settle orders name it.
struct FileId {
  const std::string& path;
  dev_t device;
  ino_t inode;
};
/// Before flushing `file`: asks the daemon and blocks until it allows the flush, until another
/// process waits to open that file, or until the daemon cannot be reached (then the flush goes
/// ahead).
void before_flush(const FileId& file);
/// While one lives, this thread's flushes do not ask the daemon: another process is waiting to
/// open the file (a settle order), which the coordination strategy must not hold up.
struct ReaderWaiting {
  ReaderWaiting();
  ~ReaderWaiting();
  ReaderWaiting(const ReaderWaiting&) = delete;
  ReaderWaiting& operator=(const ReaderWaiting&) = delete;
};
/// After a flush: when nothing is staged in the process any more, tells the daemon.
void after_flush(size_t still_staged);
/// A write of `bytes` is about to start: honours the throttle, detects phases, and in
/// burst-buffer mode waits until the phase is granted buffer nodes.
void before_write(size_t bytes);
/// Declared phases (harmonia_io_begin/end); the detector stays off once they are used.
void phase_begin(const std::string& name, size_t expected_bytes);
void phase_end();
/// The buffer nodes granted to this job's current I/O phase (burst-buffer mode).
struct Grant {
  std::vector<std::string> nodes;  ///< HOST:PORT, in stripe order; empty: write to the PFS
  std::uint64_t stripe = 0;
  std::string job;  ///< the job key that tags the data on the nodes
};
/// What the daemon's directive says of this process's writes, as staged files plan them.
struct Directive {
  std::uint64_t version = 0;  ///< changes whenever the rest does
  /// Stage new writes: always without an agent; with one, as the daemon says (and never while
  /// it is unreachable).
  bool stage = true;
  bool flush_allowed = true;  ///< staged data may be flushed now without waiting
  Grant grant;                ///< the buffer nodes of the current phase
};
/// The current directive's version: one atomic load, to check a plan made from directive().
std::uint64_t directive_version();
/// The current directive (0 as its version, and staging, without a daemon).
Directive directive();
/// Replaces the current directive with `next` (its version the next one): the agent does at each
/// directive of the daemon; a process with no daemon (a test standing in for one) may too.
void publish(Directive next);
/// The PFS servers the daemon wants new files on (indices; empty: all of them).
std::vector<uint32_t> servers();
/// Before this process opens the file `path` (device, inode on this host), or changes it by
/// path: every other process of any job writes out what it stages of it first, and, for a file
/// beneath HARMONIA_BUFFER_ROOT (`buffered`), the buffer nodes drain what they hold of it
/// (close-to-open coherence; docs/staging-library.md). Waits about 2.5 s for processes, and for
/// nodes as long as their drain takes (a node that is down: HARMONIA_NODE_WAIT). 0, or -1 with
/// EIO when bytes of the file stayed on a node that is down.
int settle_elsewhere(const std::string& path, dev_t device, ino_t inode, bool buffered);
/// One flow of drains: this process needs its bytes of the file `name` (relative to
/// HARMONIA_BUFFER_ROOT; `inode`) on `nodes` drained now, for `reason` (fsync, close, truncate,
/// reopen, other-nodes, node-full, node-lost): the scheduler orders the nodes to drain it first
/// and answers when they have. true when they did; false when a node stayed down past `wait`
/// seconds; nothing without a daemon, or when it went away meanwhile (the caller asks the nodes
/// itself).
std::optional<bool> drain_through_scheduler(const std::string& name, ino_t inode,
                                            const std::vector<std::string>& nodes, double wait,
                                            const char* reason);
/// What the buffer nodes hold of a file (a stat shows it over what the PFS says).
struct HeldByNodes {
  std::uint64_t size = 0;     ///< the file's size as written
  std::int64_t mtime_ns = 0;  ///< the time of its last write
  std::string handle;         ///< the held file's handle as its node knows it ("" unknown)
};
/// For a stat of the file with `inode` beneath HARMONIA_BUFFER_ROOT: what the buffer nodes hold
/// of it, as the scheduler daemon knows it (one round trip); nothing without a daemon.
std::optional<HeldByNodes> held_by_nodes(ino_t inode);
/// A read-only open of a file of HARMONIA_PREFETCH: when the process is in no phase, begins its
/// read phase (PhaseBegin.read) and waits, as a write phase's first write does, while the daemon
/// holds the phase back for its nodes (never once the daemon is gone). In the read phase already
/// (a file opened within the phase gap of the last close), it goes on. Returns whether the
/// process is in the read phase.
bool begin_read_phase();
/// The process closed its last descriptor of the prefetched files: the read phase ends after
/// HARMONIA_PHASE_GAP seconds unless one is opened again (begin_read_phase), and at exit.
void read_idle();
/// A granted read phase: the nodes holding the staged-in copies of `files`.
struct ReadGrant {
  std::uint64_t version = 0;       ///< changes whenever the rest does (read_grant_version)
  std::vector<std::string> nodes;  ///< HOST:PORT, in stripe order
  std::uint64_t stripe = 0;
  std::vector<std::string> files;  ///< relative to HARMONIA_BUFFER_ROOT, sorted
  bool serves(const std::string& name) const;
};
/// The current read grant (never null; without a daemon, or while none is granted, it serves no
/// file).
std::shared_ptr<const ReadGrant> read_grant();
/// The current read grant's version: one atomic load, to check a grant taken earlier.
std::uint64_t read_grant_version();
/// At exit: ends a detected phase and unregisters (best effort).
void shutdown();
/// At start, with HARMONIA_PREFETCH: registers with the daemon now rather than at the first
/// I/O, so that the read phase is announced, and staged in, while the program computes.
void start_for_prefetch();

}  // namespace harmonia::bbio::agent
