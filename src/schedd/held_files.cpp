#include "schedd/held_files.hpp"

#include <algorithm>

namespace harmonia::schedd {

std::uint64_t HeldFiles::File::size() const {
  std::uint64_t end = 0;
  for (const auto& [node, holding] : nodes) end = std::max(end, holding.end);
  return end;
}

std::int64_t HeldFiles::File::mtime_ns() const {
  std::int64_t latest = 0;
  for (const auto& [node, holding] : nodes) latest = std::max(latest, holding.mtime_ns);
  return latest;
}

bool HeldFiles::release(int node, std::uint64_t inode) {
  const auto found = files_.find(inode);
  if (found == files_.end() || found->second.nodes.erase(node) == 0) return false;
  if (found->second.nodes.empty()) files_.erase(found);
  by_node_[node].erase(inode);
  return true;
}

std::vector<std::uint64_t> HeldFiles::report(int node, const control::BufferReport& report) {
  std::vector<std::uint64_t> released;
  if (report.files_complete()) {
    // Everything the node held before and does not list now is gone (drained while the
    // scheduler was away, or the node restarted without it).
    std::unordered_set<std::uint64_t> listed;
    for (const auto& file : report.files()) listed.insert(file.inode());
    const std::unordered_set<std::uint64_t> before = by_node_[node];
    for (const std::uint64_t inode : before)
      if (!listed.count(inode) && release(node, inode)) released.push_back(inode);
  }
  for (const auto& held : report.files()) {
    File& file = files_[held.inode()];
    file.name = held.name();
    file.uid = held.uid();
    if (!held.handle().empty()) file.handle = held.handle();
    file.nodes[node] = {held.end(), held.mtime_ns()};
    by_node_[node].insert(held.inode());
  }
  for (const std::uint64_t inode : report.released())
    if (release(node, inode)) released.push_back(inode);
  return released;
}

const HeldFiles::File* HeldFiles::find(std::uint64_t inode) const {
  const auto found = files_.find(inode);
  return found == files_.end() ? nullptr : &found->second;
}

}  // namespace harmonia::schedd
