#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "netsim/fabric.hpp"

using harmonia::netsim::Cable;
using harmonia::netsim::Direction;
using harmonia::netsim::Fabric;
using harmonia::netsim::Hop;
using harmonia::netsim::Switch;

namespace {
// The paper's machine: 1,296 nodes on 72 36-port leaves, 4 pods of 18 leaves and 18 L2 switches.
Fabric paper() { return Fabric({18, 18, 4}, {1, 18, 18}); }
// A small three-level tree: 4 pods of 4 leaves of 4 nodes.
Fabric small() { return Fabric({4, 4, 4}, {1, 4, 4}); }
}  // namespace

TEST(Fabric, CountsElementsLikeTheXgft) {
  const Fabric f = paper();
  EXPECT_EQ(f.nodes(), 1296);
  EXPECT_EQ(f.leaves(), 72);
  EXPECT_EQ(f.count(2), 72);
  EXPECT_EQ(f.count(3), 324);
  EXPECT_EQ(f.pods(), 4);
  EXPECT_EQ(f.pod_size(), 18);
  // Every element of level l < 3 has up[l] cables to its parents.
  EXPECT_EQ(f.cable_count(), 1296 + 72 * 18 + 72 * 18);
  EXPECT_EQ(f.link_count(), 2 * f.cable_count());
}

TEST(Fabric, LabelsAndPositionsAreInverse) {
  const Fabric f({3, 2, 2}, {1, 2, 3});
  for (int level = 0; level <= f.levels(); ++level)
    for (long p = 0; p < f.count(level); ++p) EXPECT_EQ(f.position(level, f.label(level, p)), p);
  EXPECT_THROW(f.label(0, f.nodes()), std::out_of_range);
}

TEST(Fabric, CablesRoundTripThroughTheirIndex) {
  const Fabric f = small();
  std::set<long> seen;
  for (long i = 0; i < f.cable_count(); ++i) {
    const Cable c = f.cable(i);
    EXPECT_EQ(f.cable_index(c), i);
    seen.insert(i);
  }
  EXPECT_EQ(static_cast<long>(seen.size()), f.cable_count());
}

TEST(Fabric, RejectsShapesSimGridCannotBuildOrWeDoNotModel) {
  EXPECT_THROW(Fabric({}, {}), std::invalid_argument);
  EXPECT_THROW(Fabric({4, 4}, {1}), std::invalid_argument);
  EXPECT_THROW(Fabric({4, 0}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(Fabric({4, 4}, {2, 2}), std::invalid_argument);  // multi-homed nodes
}

TEST(Fabric, RouteLengthDependsOnTheCommonAncestor) {
  const Fabric f = small();
  EXPECT_EQ(f.route(0, 1).size(), 2u);   // same leaf
  EXPECT_EQ(f.route(0, 5).size(), 4u);   // same pod, other leaf
  EXPECT_EQ(f.route(0, 17).size(), 6u);  // other pod
  EXPECT_EQ(f.route(63, 0).size(), 6u);
  // Up then down, starting on the source's own cable and ending on the destination's.
  const auto hops = f.route(3, 42);
  EXPECT_EQ(hops.front(), (Hop{f.cable_index({0, 3, 0}), Direction::Up}));
  EXPECT_EQ(hops.back(), (Hop{f.cable_index({0, 42, 0}), Direction::Down}));
  for (size_t i = 0; i < hops.size(); ++i)
    EXPECT_EQ(hops[i].direction, i < hops.size() / 2 ? Direction::Up : Direction::Down);
}

TEST(Fabric, DModKPicksTheSpineFromTheDestinationPort) {
  // From any leaf, a destination on port p of its leaf is reached through L2 switch p of the
  // source's pod, and through the top switch (p, leaf-in-pod of the destination).
  const Fabric f = paper();
  for (long dst : {0L, 17L, 18L * 5 + 17, 18L * 40 + 3, 1295L}) {
    const long dst_leaf = f.leaf_of(dst);
    for (long src : {1L, 400L, 700L, 1294L}) {
      if (f.leaf_of(src) == dst_leaf) continue;
      const long src_pod = f.pod_of_leaf(f.leaf_of(src));
      const Switch l2 = f.switch_up(src, dst, 2);
      EXPECT_EQ(l2, (Switch{2, src_pod * 18 + f.port_of(dst)})) << src << "->" << dst;
      if (src_pod != f.pod_of_leaf(dst_leaf)) {
        EXPECT_EQ(f.turn_switch(src, dst), (Switch{3, (dst_leaf % 18) * 18 + f.port_of(dst)}));
      } else {
        EXPECT_EQ(f.turn_switch(src, dst).level, 2);
      }
    }
  }
}

TEST(Fabric, ServersOnPort18UseOnlyTheEighteenthL2SwitchOfEachPod) {
  // Paper section 5.2: with one server on the last port of every leaf, all I/O traffic goes
  // down through L2 switch 17 of the destination's pod; no other destination uses it.
  const Fabric f = paper();
  std::set<long> l2_down;
  for (long leaf = 0; leaf < f.leaves(); ++leaf) {
    const long server = leaf * 18 + 17;
    for (long src = 0; src < f.nodes(); src += 7) {
      if (f.leaf_of(src) == leaf) continue;
      for (const Hop& h : f.route(src, server)) {
        const Cable c = f.cable(h.cable);
        if (h.direction == Direction::Down && c.level == 1)
          l2_down.insert(f.parent(1, c.lower, c.port));
      }
    }
  }
  EXPECT_EQ(l2_down, (std::set<long>{17, 35, 53, 71}));
}

TEST(Fabric, EveryDownPathLinkServesOneDestination) {
  // D-mod-k on a full fat-tree: the down links into a node's leaf, L2 switch and core switch are
  // used by traffic to that node only, so contention happens on the way up.
  const Fabric f = small();
  std::vector<std::set<long>> destinations(static_cast<size_t>(f.link_count()));
  for (long s = 0; s < f.nodes(); ++s)
    for (long d = 0; d < f.nodes(); ++d)
      if (s != d)
        for (const Hop& h : f.route(s, d))
          if (h.direction == Direction::Down)
            destinations[static_cast<size_t>(Fabric::link_index(h))].insert(d);
  for (const auto& set : destinations) EXPECT_LE(set.size(), 1u);
}

TEST(Fabric, TwoLevelAndOneLevelTreesRoute) {
  const Fabric two({4, 3}, {1, 2});
  EXPECT_EQ(two.pods(), 1);
  EXPECT_EQ(two.route(0, 11).size(), 4u);
  EXPECT_EQ(two.switch_up(0, 11, 2), (Switch{2, 1}));  // port 11 mod 2 parents
  const Fabric one({8}, {1});
  EXPECT_EQ(one.leaves(), 1);
  EXPECT_EQ(one.route(2, 5).size(), 2u);
}
