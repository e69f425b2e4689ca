#pragma once
// Fences (docs/buffer-nodes.md, "Fences"): when a client loses a buffer node that may hold its
// writes of a file (a request it sent got no answer), and then writes ranges of that file
// elsewhere, it first records those ranges in a fence file on the PFS,
// `ROOT/.harmonia/fences/NODE/FILE`. When the node drains that file it skips the fenced ranges
// (they hold newer bytes) and deletes the fence. A lock file per node,
// `ROOT/.harmonia/fences/NODE.lock` (flock), held by the node for a whole drain and by a client
// while it appends, makes each fenced write land either wholly after the node's drain of the
// file or be skipped by it. Used by libharmonia and harmonia-bbd, with real I/O calls only.

#include <cstdint>
#include <string>
#include <vector>

namespace harmonia::bbio::fences {

/// The directory under the PFS root that clients and nodes reserve for their own files.
inline constexpr const char* kReservedDir = ".harmonia";

struct Range {
  std::uint64_t offset = 0, length = 0;
};

/// Whether `name` (relative to ROOT) lies in the reserved directory.
bool reserved(const std::string& name);

/// Takes NODE's fence lock (creating the directories and the lock file); the descriptor, or -1
/// with errno when it cannot.
int lock(const std::string& root, const std::string& node);
/// Releases a lock taken by lock().
void unlock(int fd);

/// Appends `range` to the fence of `file` (relative to ROOT), NODE's lock held; false with errno
/// on failure, the fence then as it was.
bool append(const std::string& root, const std::string& node, const std::string& file, Range range);
/// The ranges fenced for `file`, merged and sorted (a short entry left by a client that died
/// mid-append is skipped).
std::vector<Range> read(const std::string& root, const std::string& node, const std::string& file);
/// Deletes the fence of `file`, if any.
void remove(const std::string& root, const std::string& node, const std::string& file);
/// Files with a fence for NODE, relative to ROOT (regular files only: links are not followed).
std::vector<std::string> fenced_files(const std::string& root, const std::string& node);

/// The parts of [offset, offset + length) that no range of `fenced` (merged, sorted) covers.
std::vector<Range> uncovered(std::uint64_t offset, std::uint64_t length,
                             const std::vector<Range>& fenced);

}  // namespace harmonia::bbio::fences
