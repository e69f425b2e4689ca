#pragma once
/// @file A fat-tree exactly as SimGrid 3.32's `create_fatTree_zone` builds and routes it, without
/// SimGrid: element labels, cables, and the static D-mod-k route of every transfer. The simulator
/// uses it to count bytes per link and the placement generators to find leaves and pods; the
/// binary's `--check-routes` mode compares it with SimGrid's own routes
/// (docs/network-interference.md).

#include <cstdint>
#include <string>
#include <vector>

namespace harmonia::netsim {

/// One direction of a cable.
enum class Direction : uint8_t { Up, Down };

/// A cable between an element of `level` (0 = compute node, 1 = leaf switch, ...) at `lower`
/// and its parent switch, plugged into the lower element's up-port `port`.
struct Cable {
  int level;
  long lower;
  int port;
  bool operator==(const Cable&) const = default;
};

/// One step of a route: a cable (by index, see Fabric::cable_index) and the way it is crossed.
struct Hop {
  long cable;
  Direction direction;
  bool operator==(const Hop&) const = default;
};

/// A switch: its level (1 = leaf) and position within that level.
struct Switch {
  int level;
  long position;
  bool operator==(const Switch&) const = default;
};

/// XGFT(L; down; up) with one cable between related elements (SimGrid's `link_count` all 1).
///
/// Labels follow SimGrid: an element of level i has digits label[0..L-1], digit j running over
/// up[j] values when j < i and over down[j] values otherwise; its position is the mixed-radix
/// number with digit 0 the fastest. A parent differs from its child in digit `child level` only,
/// and the child reaches it through up-port `parent.label[child level]`.
class Fabric {
 public:
  /// Throws std::invalid_argument unless down and up have the same size L >= 1, every entry is
  /// >= 1, and up[0] == 1 (one cable per compute node).
  Fabric(std::vector<unsigned> down, std::vector<unsigned> up);

  int levels() const { return static_cast<int>(down_.size()); }
  const std::vector<unsigned>& down() const { return down_; }
  const std::vector<unsigned>& up() const { return up_; }

  /// Elements at `level` (0: compute nodes, levels(): the top switches).
  long count(int level) const { return counts_.at(static_cast<size_t>(level)); }
  long nodes() const { return count(0); }
  long leaves() const { return count(1); }
  /// Compute nodes per leaf switch.
  int leaf_size() const { return static_cast<int>(down_[0]); }
  long leaf_of(long node) const { return node / down_[0]; }
  int port_of(long node) const { return static_cast<int>(node % down_[0]); }
  /// A pod is the set of leaves under one group of level-2 switches (the whole tree when L < 3).
  long pods() const { return levels() < 3 ? 1 : leaves() / down_[1]; }
  long pod_of_leaf(long leaf) const { return levels() < 3 ? 0 : leaf / down_[1]; }
  /// Leaves per pod.
  long pod_size() const { return leaves() / pods(); }

  std::vector<int> label(int level, long position) const;
  long position(int level, const std::vector<int>& label) const;
  /// The parent of element (level, position) behind its up-port `port`.
  long parent(int level, long position, int port) const;

  /// Cables: for each level l < L, count(l) * up[l] of them, numbered level by level.
  long cable_count() const { return cable_offset_.back(); }
  long cable_index(const Cable& cable) const;
  Cable cable(long index) const;
  /// Directed links (two per cable): 2 * cable + (direction == Down).
  long link_count() const { return 2 * cable_count(); }
  static long link_index(const Hop& hop) {
    return 2 * hop.cable + (hop.direction == Direction::Down ? 1 : 0);
  }

  /// The link a packet for node `dst` leaves element (level, position) by, under SimGrid's
  /// D-mod-k routing: down towards `dst` when it lies below this switch, else up through the
  /// port the destination's position selects. A compute node always sends up (even to itself).
  /// This is the one routing decision: route() follows it, and so do the packet-level switches.
  Hop next_hop(int level, long position, long dst) const;
  /// The links a transfer from node `src` to node `dst` crosses under SimGrid's D-mod-k routing,
  /// in order: up to the lowest common ancestor chosen by the destination's position, then down.
  /// `out` is cleared first.
  void route(long src, long dst, std::vector<Hop>& out) const;
  std::vector<Hop> route(long src, long dst) const {
    std::vector<Hop> hops;
    route(src, dst, hops);
    return hops;
  }
  /// The highest switch of that route (for a route leaving the pod, a top-level switch).
  Switch turn_switch(long src, long dst) const;
  /// The switch of `level` that the route from `src` to `dst` passes on its way up, if it goes
  /// that high (else {-1, -1}). For a 3-level tree, level 2 is "which spine".
  Switch switch_up(long src, long dst, int level) const;

  /// What elements of a level are called: "node", "leaf", "L2", "L3", ...
  static std::string level_name(int level);
  /// A readable name: "node-12", "leaf-3", "L2-5", "L3-40".
  static std::string switch_name(const Switch& s) {
    return level_name(s.level) + "-" + std::to_string(s.position);
  }

 private:
  bool in_subtree(int level, const std::vector<int>& switch_label,
                  const std::vector<int>& node_label) const;
  int up_port(int level, long dst) const;
  unsigned radix(int level, int digit) const {
    return digit < level ? up_[static_cast<size_t>(digit)] : down_[static_cast<size_t>(digit)];
  }

  std::vector<unsigned> down_, up_;
  std::vector<long> counts_;        // per level 0..L
  std::vector<long> cable_offset_;  // per level 0..L-1, plus the total
};

}  // namespace harmonia::netsim
