#include "netsim/fabric.hpp"

#include <stdexcept>

namespace harmonia::netsim {

Fabric::Fabric(std::vector<unsigned> down, std::vector<unsigned> up)
    : down_(std::move(down)), up_(std::move(up)) {
  if (down_.empty() || down_.size() != up_.size())
    throw std::invalid_argument("fabric: down and up need one entry per level (at least one)");
  for (size_t i = 0; i < down_.size(); ++i)
    if (down_[i] < 1 || up_[i] < 1)
      throw std::invalid_argument("fabric: down and up entries must be >= 1");
  if (up_[0] != 1) throw std::invalid_argument("fabric: up[0] must be 1 (one cable per node)");
  const int levels = this->levels();
  // Level i has, per digit, up[j] values below i and down[j] values from i on (SimGrid's labels).
  for (int i = 0; i <= levels; ++i) {
    long n = 1;
    for (int j = 0; j < levels; ++j) {
      n *= radix(i, j);
      if (n > (1L << 40)) throw std::invalid_argument("fabric: too many elements");
    }
    counts_.push_back(n);
  }
  cable_offset_.push_back(0);
  for (int l = 0; l < levels; ++l)
    cable_offset_.push_back(cable_offset_.back() + count(l) * up_[static_cast<size_t>(l)]);
}

std::vector<int> Fabric::label(int level, long position) const {
  if (level < 0 || level > levels() || position < 0 || position >= count(level))
    throw std::out_of_range("fabric: no element " + std::to_string(position) + " at level " +
                            std::to_string(level));
  std::vector<int> digits(static_cast<size_t>(levels()));
  for (int j = 0; j < levels(); ++j) {
    const auto r = static_cast<long>(radix(level, j));
    digits[static_cast<size_t>(j)] = static_cast<int>(position % r);
    position /= r;
  }
  return digits;
}

long Fabric::position(int level, const std::vector<int>& label) const {
  long position = 0;
  long weight = 1;
  for (int j = 0; j < levels(); ++j) {
    position += label[static_cast<size_t>(j)] * weight;
    weight *= radix(level, j);
  }
  return position;
}

long Fabric::parent(int level, long position, int port) const {
  if (level >= levels()) throw std::out_of_range("fabric: the top level has no parent");
  auto digits = label(level, position);
  digits[static_cast<size_t>(level)] = port;
  return this->position(level + 1, digits);
}

long Fabric::cable_index(const Cable& c) const {
  return cable_offset_.at(static_cast<size_t>(c.level)) +
         c.lower * up_.at(static_cast<size_t>(c.level)) + c.port;
}

Cable Fabric::cable(long index) const {
  if (index < 0 || index >= cable_count()) throw std::out_of_range("fabric: no such cable");
  int level = 0;
  while (index >= cable_offset_[static_cast<size_t>(level) + 1]) ++level;
  const long rel = index - cable_offset_[static_cast<size_t>(level)];
  const long up = up_[static_cast<size_t>(level)];
  return {level, rel / up, static_cast<int>(rel % up)};
}

bool Fabric::in_subtree(int level, const std::vector<int>& switch_label,
                        const std::vector<int>& node_label) const {
  for (int m = level; m < levels(); ++m)
    if (switch_label[static_cast<size_t>(m)] != node_label[static_cast<size_t>(m)]) return false;
  return true;
}

int Fabric::up_port(int level, long dst) const {
  // SimGrid's D-mod-k: the destination's position, divided by the parents per element of every
  // lower level, modulo this level's parents.
  long d = dst;
  for (int i = 0; i < level; ++i) d /= up_[static_cast<size_t>(i)];
  return static_cast<int>(d % up_[static_cast<size_t>(level)]);
}

Hop Fabric::next_hop(int level, long position, long dst) const {
  const auto here = label(level, position);
  const auto to = label(0, dst);
  if (level > 0 && in_subtree(level, here, to)) {
    // Down to the child whose digit `level - 1` is the destination's; it reaches us through its
    // up-port here[level - 1].
    auto child = here;
    child[static_cast<size_t>(level) - 1] = to[static_cast<size_t>(level) - 1];
    return {cable_index({level - 1, this->position(level - 1, child),
                         here[static_cast<size_t>(level) - 1]}),
            Direction::Down};
  }
  return {cable_index({level, position, up_port(level, dst)}), Direction::Up};
}

void Fabric::route(long src, long dst, std::vector<Hop>& out) const {
  out.clear();
  int level = 0;
  long position = src;
  // A node is never its own subtree, so even src == dst goes up to the leaf, as in SimGrid.
  do {
    const Hop hop = next_hop(level, position, dst);
    out.push_back(hop);
    const Cable c = cable(hop.cable);
    if (hop.direction == Direction::Up) {
      position = parent(c.level, c.lower, c.port);
      level = c.level + 1;
    } else {
      position = c.lower;
      level = c.level;
    }
  } while (level > 0);
}

Switch Fabric::turn_switch(long src, long dst) const {
  const auto hops = route(src, dst);
  int highest = 0;
  long position = -1;
  for (const auto& h : hops) {
    if (h.direction != Direction::Up) break;
    const Cable c = cable(h.cable);
    highest = c.level + 1;
    position = parent(c.level, c.lower, c.port);
  }
  return {highest, position};
}

Switch Fabric::switch_up(long src, long dst, int level) const {
  for (const auto& h : route(src, dst)) {
    if (h.direction != Direction::Up) break;
    const Cable c = cable(h.cable);
    if (c.level + 1 == level) return {level, parent(c.level, c.lower, c.port)};
  }
  return {-1, -1};
}

std::string Fabric::level_name(int level) {
  if (level == 0) return "node";
  if (level == 1) return "leaf";
  return "L" + std::to_string(level);
}

}  // namespace harmonia::netsim
