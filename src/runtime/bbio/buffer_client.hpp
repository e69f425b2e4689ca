#pragma once
// libharmonia's data-plane client (docs/buffer-nodes.md): writes of a granted I/O phase go to
// buffer nodes (harmonia-bbd), striped round-robin over the granted nodes; reads, truncation and
// a change of nodes first drain the file from the nodes that hold it, so that the file on the PFS
// always ends with the bytes written last. A node that is full or unreachable makes the write go
// through to the PFS instead (after draining what that node holds of the file, when it can).
// While a node that holds older data of a file is unreachable, every write of that range
// elsewhere is fenced (fence()): the node's drain, when it comes back, skips the range.

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace harmonia::bbio::buffers {

/// One connection to a node. The transport is behind this interface: TCP now; an RDMA transport
/// (UCX) needs connect by address, ordered reliable messages of up to 16 MiB + 4 KiB, and a
/// registered buffer for the payload (docs/buffer-nodes.md, "Transport").
class Channel {
 public:
  virtual ~Channel() = default;
  /// Sends one whole frame, then `length` bytes of `payload` raw (a write's bytes after its
  /// frame); false when the node is gone.
  virtual bool send(const std::string& frame, const char* payload, std::size_t length) = 0;
  /// Receives one frame's body into `body`; false when the node is gone or sent garbage.
  virtual bool receive(std::string& body) = 0;
  /// Whether the node has closed this channel while nothing was in flight (its idle timeout):
  /// then a new channel is opened, and the node is not lost.
  virtual bool closed_by_node() = 0;
  /// From now on, a receive that waits longer than `seconds` for the node fails (0: no limit).
  virtual void limit_wait(double seconds) = 0;
};

/// A file on the buffer nodes: its name relative to HARMONIA_BUFFER_ROOT when it was opened, and
/// its inode, which the nodes know it by (its data follows it through renames: bb.proto).
struct FileKey {
  std::string name;
  std::uint64_t inode = 0;
  /// Its file handle (name_to_handle_at): a node finds the file by it even when it was renamed
  /// or deleted before the first write reached the node. "" where the file system has none.
  std::string handle;
};

/// The file handle of the open file `fd`, or "" where the file system or kernel gives none.
std::string handle_of(int fd);
/// Whether this process's user (effective ids, groups, ACLs) may open the file behind `fd`
/// for writing now, as a buffer node acting for it would.
bool user_may_open_for_writing(int fd);
/// The file handle of the file `path` names (relative to `dirfd`, its links followed; "" for
/// `dirfd` itself), or "".
std::string handle_at(int dirfd, const char* path);

/// Before [offset, offset + length) of `file` is written anywhere but the nodes this process
/// lost while they may hold its writes of that file: records the range as newer than what those
/// nodes hold, so that their drains skip it (docs/buffer-nodes.md, "Fences"). Nothing to do for
/// a file no lost node may hold.
void fence(const FileKey& file, off64_t offset, std::size_t length);

/// Opens a TCP channel to "HOST:PORT", or nullptr.
std::unique_ptr<Channel> connect_tcp(const std::string& address);

/// The name of `path` (absolute) relative to HARMONIA_BUFFER_ROOT, the PFS directory the buffer
/// nodes drain to; "" when the path is outside it (never buffered) or the variable is unset.
std::string relative_name(const std::string& path);
/// relative_name against `root` (resolved, absolute): "" when `root` is empty, when `path` is not
/// beneath it, or when it names the nodes' and clients' own files (fences).
std::string name_beneath(const std::string& root, const std::string& path);

/// Sends `iov` (`count` pieces) for `offset` of `file` to `nodes`, `stripe` bytes per node in
/// turn; true when every byte is acknowledged. false: some bytes are not on a node (full or
/// gone); the caller writes the whole range through to the PFS.
bool write(const FileKey& file, const std::string& job, const struct iovec* iov, int count,
           off64_t offset, const std::vector<std::string>& nodes, std::uint64_t stripe);
/// The PFS file as a reader sees it now (fstat): a node serves a staged-in copy of it only while
/// the copy was made of the same file (bb.proto FileIdentity).
struct FileIdentity {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};
/// Reads [offset, offset + length) of `file` from the `nodes` it was written to (`stripe` bytes
/// per node in turn) into `out`; false when they do not hold all of it, or hold it on a node this
/// process lost since (the caller then reads the PFS, after draining). With `identity`: reads the
/// copies staged in for a read phase, which the nodes serve only to a reader of that very file.
bool read(const FileKey& file, off64_t offset, std::size_t length,
          const std::vector<std::string>& nodes, std::uint64_t stripe, std::string& out,
          const FileIdentity* identity = nullptr);
/// Whether this process wrote the file with `inode` to buffer nodes that may still hold it (or
/// lost them since).
bool wrote(std::uint64_t inode);
/// Drains `file` to the PFS from `nodes` and from every node lost since this process wrote the
/// file there, and waits for the drains, `reason` saying why it is needed now (fsync, close,
/// truncate, reopen, other-nodes, node-full, node-lost). One flow of drains: with a scheduler
/// daemon, it orders the nodes (an urgent drain: first on each node) and answers when they have;
/// without one, the nodes are asked directly. A node that is down is waited for up to `wait`
/// seconds (tried again at once, then every 0.2 s). Returns the nodes that did not drain it.
std::vector<std::string> drain(const FileKey& file, std::vector<std::string> nodes, double wait,
                               const char* reason);
/// drain(), and when a node did not drain the file: says so on stderr for `shown` (the file as
/// the program names it) and returns false with errno EIO.
bool drained_or_unavailable(const std::string& shown, const FileKey& file,
                            std::vector<std::string> nodes, double wait, const char* reason);
/// drain(), and when a node did not drain the file: says so on stderr for `shown` (the file as
/// the program names it) and returns false with errno EIO.
bool drained_or_unavailable(const std::string& shown, const FileKey& file,
                            std::vector<std::string> nodes, double wait);
/// The nodes that may hold this process's writes of `file` and whose connection failed since:
/// until they drain it, the PFS may lack (or hold older) bytes of it.
std::vector<std::string> lost_nodes(std::uint64_t inode);
/// At the file's close: every node holding acknowledged writes of it tells the scheduler what
/// it holds (bb.proto Publish), so that any process's stat or open after the close finds the
/// bytes. Nodes that do not answer join lost_nodes(file); false when some node could not
/// publish (it is down, or has no scheduler): the caller then drains the file itself.
bool publish(const FileKey& file);
/// Whether this process left writes on buffer nodes that they may still hold (one lock, no
/// lookup: every open asks).
bool holds_any();
/// Whether the file at `path` (relative to `dirfd`), on the file system `device`, lies beneath
/// HARMONIA_BUFFER_ROOT, judged without resolving the path (a stat asks it): on the root's file
/// system and beneath it by name. A path that reaches the root through a symbolic link from
/// outside it is not recognised.
bool beneath_buffer_root(int dirfd, const char* path, dev_t device);
/// Before the file with `inode` (at the absolute, resolved `path`; "" when it has none) is opened
/// again in this process: drains it from the nodes that may hold this process's writes of it
/// (it is known by its inode: renamed since, it is still found), so that what the open sees (or
/// truncates) is complete; false with EIO when a node holding some of it stayed down for `wait`
/// seconds.
bool settle_file(const std::string& path, std::uint64_t inode, double wait);

}  // namespace harmonia::bbio::buffers
