#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "netsim/placement.hpp"

using namespace harmonia::netsim;

namespace {
Fabric paper() { return Fabric({18, 18, 4}, {1, 18, 18}); }

std::map<long, int> per_leaf(const Fabric& f, const std::vector<long>& nodes) {
  std::map<long, int> count;
  for (long n : nodes) ++count[f.leaf_of(n)];
  return count;
}
}  // namespace

TEST(ServerPlacement, IsolatedTargetFillsFourLeavesOnePerPod) {
  const Fabric f = paper();
  const auto servers = place_servers(f, 72, ServerPlacement::IsolatedTarget, 1);
  ASSERT_EQ(servers.size(), 72u);
  const auto leaves = per_leaf(f, servers);
  ASSERT_EQ(leaves.size(), 4u);
  std::set<long> pods;
  for (auto [leaf, count] : leaves) {
    EXPECT_EQ(count, 18) << "leaf " << leaf << " is reserved whole";
    pods.insert(f.pod_of_leaf(leaf));
  }
  EXPECT_EQ(pods.size(), 4u) << "two server leaves in each half of the fabric";
  EXPECT_TRUE(std::is_sorted(servers.begin(), servers.end()));
}

TEST(ServerPlacement, SpreadTargetPutsOneServerOnPort18OfEveryLeaf) {
  const Fabric f = paper();
  const auto servers = place_servers(f, 72, ServerPlacement::SpreadTarget, 1);
  const auto leaves = per_leaf(f, servers);
  EXPECT_EQ(leaves.size(), 72u);
  for (long s : servers) EXPECT_EQ(f.port_of(s), 17);
  // More servers than leaves: the next round takes the port before.
  const auto more = place_servers(f, 80, ServerPlacement::SpreadTarget, 1);
  EXPECT_EQ(std::count_if(more.begin(), more.end(), [&](long s) { return f.port_of(s) == 16; }), 8);
}

TEST(ServerPlacement, RandomTargetIsDistinctAndDeterministicPerSeed) {
  const Fabric f = paper();
  const auto a = place_servers(f, 72, ServerPlacement::RandomTarget, 7);
  const auto b = place_servers(f, 72, ServerPlacement::RandomTarget, 7);
  const auto c = place_servers(f, 72, ServerPlacement::RandomTarget, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<long>(a.begin(), a.end()).size(), 72u);
  // Not confined to a few leaves like isolated-target.
  EXPECT_GT(per_leaf(f, a).size(), 30u);
}

TEST(ServerPlacement, RejectsWhatDoesNotFit) {
  const Fabric f({4, 4}, {1, 4});
  EXPECT_THROW(place_servers(f, 0, ServerPlacement::SpreadTarget, 1), std::invalid_argument);
  EXPECT_THROW(place_servers(f, 16, ServerPlacement::RandomTarget, 1), std::invalid_argument);
  EXPECT_THROW(parse_server_placement("everywhere"), std::invalid_argument);
  EXPECT_EQ(parse_server_placement("spread-target"), ServerPlacement::SpreadTarget);
}

TEST(JobPlacement, RandomNodeSplitsComputeNodesByFraction) {
  const Fabric f = paper();
  const auto servers = place_servers(f, 72, ServerPlacement::IsolatedTarget, 1);
  for (double fraction : {0.25, 0.5, 0.75}) {
    const auto layout = place_jobs(f, servers, fraction, JobPlacement::RandomNode, 3);
    EXPECT_EQ(layout.io_clients.size(), static_cast<size_t>(1224 * fraction));
    EXPECT_EQ(layout.io_clients.size() + layout.mpi_clients.size(), 1224u);
    for (long n : layout.io_clients) EXPECT_EQ(layout.roles[static_cast<size_t>(n)], Role::Io);
    for (long n : layout.mpi_clients) EXPECT_EQ(layout.roles[static_cast<size_t>(n)], Role::Mpi);
    for (long n : servers) EXPECT_EQ(layout.roles[static_cast<size_t>(n)], Role::Server);
  }
  // Random nodes: most compute leaves hold both jobs.
  const auto layout = place_jobs(f, servers, 0.5, JobPlacement::RandomNode, 3);
  const auto io = per_leaf(f, layout.io_clients);
  const auto mpi = per_leaf(f, layout.mpi_clients);
  int mixed = 0;
  for (auto [leaf, count] : io) mixed += mpi.count(leaf) ? 1 : 0;
  EXPECT_GT(mixed, 60);
}

TEST(JobPlacement, RandomSwitchGivesWholeLeavesToOneJob) {
  const Fabric f = paper();
  for (auto server_placement : {ServerPlacement::IsolatedTarget, ServerPlacement::SpreadTarget}) {
    const auto servers = place_servers(f, 72, server_placement, 1);
    for (double fraction : {0.25, 0.5, 0.75}) {
      const auto layout = place_jobs(f, servers, fraction, JobPlacement::RandomSwitch, 5);
      const auto io = per_leaf(f, layout.io_clients);
      const auto mpi = per_leaf(f, layout.mpi_clients);
      int shared = 0;
      for (auto [leaf, count] : io) shared += mpi.count(leaf) ? 1 : 0;
      EXPECT_LE(shared, 1) << "at most the leaf where the I/O job's share runs out is split";
      EXPECT_EQ(layout.io_clients.size() + layout.mpi_clients.size(),
                static_cast<size_t>(f.nodes()) - 72);
    }
  }
  // 612 = 34 whole leaves: no split at all with isolated servers.
  const auto servers = place_servers(f, 72, ServerPlacement::IsolatedTarget, 1);
  const auto layout = place_jobs(f, servers, 0.5, JobPlacement::RandomSwitch, 5);
  for (auto [leaf, count] : per_leaf(f, layout.io_clients)) EXPECT_EQ(count, 18);
}

TEST(JobPlacement, OddMpiCountLeavesOneNodeIdle) {
  const Fabric f({4, 4}, {1, 4});
  const auto servers = place_servers(f, 1, ServerPlacement::SpreadTarget, 1);
  const auto layout = place_jobs(f, servers, 0.0, JobPlacement::RandomNode, 1);
  EXPECT_EQ(layout.mpi_clients.size(), 14u);
  EXPECT_EQ(std::count(layout.roles.begin(), layout.roles.end(), Role::Idle), 1);
}

TEST(JobPlacement, SameSeedSameLayoutOtherSeedOther) {
  const Fabric f = paper();
  const auto servers = place_servers(f, 72, ServerPlacement::IsolatedTarget, 1);
  const auto a = place_jobs(f, servers, 0.5, JobPlacement::RandomNode, 11);
  const auto b = place_jobs(f, servers, 0.5, JobPlacement::RandomNode, 11);
  const auto c = place_jobs(f, servers, 0.5, JobPlacement::RandomNode, 12);
  EXPECT_EQ(a.io_clients, b.io_clients);
  EXPECT_NE(a.io_clients, c.io_clients);
}
