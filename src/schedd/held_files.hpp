#pragma once
/// @file The files the buffer nodes hold written data of, as the nodes' reports say
/// (control.proto HeldFile): what a stat shows over the PFS file, and which nodes a settle must
/// have drain a file first (close-to-open coherence, docs/staging-library.md). No I/O: `Service`
/// feeds it.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "control/control.pb.h"

namespace harmonia::schedd {

class HeldFiles {
 public:
  struct Holding {
    std::uint64_t end = 0;      ///< where the bytes this node holds end
    std::int64_t mtime_ns = 0;  ///< when its last write of the file arrived
  };
  struct File {
    std::string name;  ///< the latest name a node reported
    uid_t uid = 0;
    std::string handle;  ///< its file handle as a node reported it ("" unknown)
    std::map<int, Holding> nodes;
    /// The file's size as written: the end of the last byte any node holds.
    std::uint64_t size() const;
    /// The time of the last write any node received.
    std::int64_t mtime_ns() const;
  };

  /// A report of `node`: the files in `report.files` are held as it says (and only those, with
  /// `files_complete`), those in `report.released` no longer. Returns the files this node
  /// released (a settle waiting for them may complete).
  std::vector<std::uint64_t> report(int node, const control::BufferReport& report);
  /// The file with `inode`, or null when no node holds data of it.
  const File* find(std::uint64_t inode) const;
  std::size_t size() const { return files_.size(); }

 private:
  /// `node` no longer holds `inode`; true when it did.
  bool release(int node, std::uint64_t inode);

  std::unordered_map<std::uint64_t, File> files_;
  std::unordered_map<int, std::unordered_set<std::uint64_t>> by_node_;
};

}  // namespace harmonia::schedd
