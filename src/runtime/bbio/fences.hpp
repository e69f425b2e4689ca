#pragma once
// Fences (docs/buffer-nodes.md, "Fences"): when a client loses a buffer node holding writes of a
// file, and then writes ranges of that file elsewhere, it first records those ranges in a fence
// file on the PFS, `ROOT/.harmonia/fences/NODE/FILE`, each tagged with the node's log that holds
// the older writes. When the node comes back and drains that log, it skips the fenced ranges
// (they hold newer bytes) and drops their entries. A lock file per node,
// `ROOT/.harmonia/fences/NODE.lock` (flock), keeps a fenced write and the node's drain from
// interleaving. Used by libharmonia and harmonia-bbd, with real I/O calls only.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace harmonia::bbio::fences {

/// The directory under the PFS root that clients and nodes reserve for their own files.
inline constexpr const char* kReservedDir = ".harmonia";

struct Range {
  std::uint64_t offset = 0, length = 0;
};

/// One fenced range: newer than what the node's log `log` holds there.
struct Entry {
  std::uint64_t log = 0, offset = 0, length = 0;
};

/// Whether `name` (relative to ROOT) lies in the reserved directory.
bool reserved(const std::string& name);

/// Takes NODE's fence lock (creating the directories and the lock file); the descriptor, or -1
/// with errno when it cannot.
int lock(const std::string& root, const std::string& node);
/// Releases a lock taken by lock().
void unlock(int fd);

/// Appends `entry` to the fence of `file` (relative to ROOT); false with errno on failure.
bool append(const std::string& root, const std::string& node, const std::string& file,
            const Entry& entry);
/// The entries of the fence of `file` (a short entry left by a client that died is skipped).
std::vector<Entry> read(const std::string& root, const std::string& node, const std::string& file);
/// Keeps only the entries of `file`'s fence whose log is in `logs`: rewrites the fence, or
/// deletes it when none is left.
void keep(const std::string& root, const std::string& node, const std::string& file,
          const std::set<std::uint64_t>& logs);
/// Files with a fence for NODE, relative to ROOT.
std::vector<std::string> fenced_files(const std::string& root, const std::string& node);

/// The ranges of `entries` for `log`, merged and sorted.
std::vector<Range> ranges_of(const std::vector<Entry>& entries, std::uint64_t log);
/// The parts of [offset, offset + length) that no range of `fenced` (merged, sorted) covers.
std::vector<Range> uncovered(std::uint64_t offset, std::uint64_t length,
                             const std::vector<Range>& fenced);

}  // namespace harmonia::bbio::fences
