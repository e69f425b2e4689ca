#pragma once
// Fences (docs/buffer-nodes.md, "Fences"): when a client loses a buffer node that may hold its
// writes of a file (a request it sent got no answer), and then writes ranges of that file
// elsewhere, it first records those ranges in a fence file on the PFS,
// `ROOT/.harmonia/fences/NODE/FILE`. When the node drains that file it skips the fenced ranges
// (they hold newer bytes) and deletes the fence. A lock file per node,
// `ROOT/.harmonia/fences/NODE.lock` (flock), held by the node for a whole drain and by a client
// while it appends, makes each fenced write land either wholly after the node's drain of the
// file or be skipped by it. Used by libharmonia and harmonia-bbd, with real I/O calls only.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace harmonia::storage::fences {

/// The directory under the PFS root that clients and nodes reserve for their own files.
inline constexpr const char* kReservedDir = ".harmonia";

struct Range {
  std::uint64_t offset = 0, length = 0;
};

/// Whether `name` (relative to ROOT) lies in the reserved directory.
bool reserved(const std::string& name);

/// ROOT is a descriptor of the PFS root; every path below it is opened beneath it with no
/// symbolic link followed (common/beneath.hpp), and the directories made are sticky and writable
/// by all (mode 01777, whatever the umask), so every user can fence and nobody can delete or
/// replace another's fences.

/// Takes NODE's fence lock (creating the directories and the lock file); the descriptor, or -1
/// with errno when it cannot.
int lock(int root, const std::string& node);
/// Releases a lock taken by lock().
void unlock(int fd);

/// Makes NODE's fence directories and gives each of them mode 01777 (every user's job may fence,
/// nobody may delete another's fence), also to existing ones with another mode, when this
/// process may (it owns them, or is root). 0, or errno.
int prepare(int root, const std::string& node);

/// Appends `range` to the fence of `file` (relative to ROOT), NODE's lock held; false with errno
/// on failure, the fence then as it was.
bool append(int root, const std::string& node, const std::string& file, Range range);
/// The ranges fenced for `file`, merged and sorted (a short entry left by a client that died
/// mid-append is skipped). Honoured only when the fence is a regular file with one link, owned
/// by root, by this process's user, or by `target_owner` (the owner of the PFS file the ranges
/// are skipped in: who could have written those bytes there itself); otherwise none, and
/// `ignored` (when given) says why.
std::vector<Range> read(int root, const std::string& node, const std::string& file,
                        uid_t target_owner, std::string* ignored = nullptr);
/// Deletes the fence of `file`, if any (a link there is removed, never followed).
void remove(int root, const std::string& node, const std::string& file);
/// Deletes NODE's fences (regular files) of every file `keep` says no to; links are neither
/// followed nor removed, and nothing outside ROOT/.harmonia/fences/NODE is touched. The number
/// deleted.
std::size_t remove_unless(int root, const std::string& node,
                          const std::function<bool(const std::string& file)>& keep);

/// The parts of [offset, offset + length) that no range of `fenced` (merged, sorted) covers.
std::vector<Range> uncovered(std::uint64_t offset, std::uint64_t length,
                             const std::vector<Range>& fenced);

}  // namespace harmonia::storage::fences
