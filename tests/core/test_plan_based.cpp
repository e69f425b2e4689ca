// The plan-based peer (Kopanski and Rzadca, Euro-Par 2021; docs/scheduling-model.md section 8):
// every waiting job is planned at its earliest start in some order, the order chosen for the
// sum of waiting times to the power alpha, and the jobs the best plan starts now start. Each test
// fails if the plan's cost, or the waiting times it is made of, were another.
#include <gtest/gtest.h>

#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig machine(int nodes, double alpha = 2, int depth = 0) {
  SchedulerConfig c = shared_machine(nodes);
  c.plan_alpha = alpha;
  c.plan_reservation_depth = depth;
  return c;
}

AppInfo job(const std::string& name, int nodes, double walltime, double declared = 10 * GB) {
  return batch_job(name, nodes, walltime, declared);
}

}  // namespace

TEST(PlanBased, TheCostsPowerChoosesBetweenTheOldJobAndTheShortOnes) {
  // 10 nodes, all held by R until t = 100. L (all nodes, 30 s) waits since t = 0, S1 and S2
  // (all nodes, 10 s each) since t = 95. Planned at t = 100:
  //   L, S1, S2: waits 100, 35, 45 -> sum 180, sum of squares 13250
  //   S1, S2, L: waits 5, 15, 120  -> sum 140, sum of squares 14650
  // The sum (alpha 1) takes the short jobs first, the squares (alpha 2) the old job.
  for (const double alpha : {1.0, 2.0}) {
    PolicyDriver d("plan-based", machine(10, alpha));
    const AppId r = d.reg(job("r", 10, 100), 0);
    const AppId l = d.reg(job("l", 10, 30), 0);
    const AppId s1 = d.reg(job("s1", 10, 10), 95);
    d.reg(job("s2", 10, 10), 95);
    EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r})) << "nothing fits before t = 100";
    d.end(r, 100);
    ASSERT_EQ(d.actions.admitted.size(), 2u) << "alpha " << alpha;
    EXPECT_EQ(d.actions.admitted[1], alpha == 2 ? l : s1) << "alpha " << alpha;
  }
}

TEST(PlanBased, OfTwoEqualJobsTheOlderGoesFirst) {
  // Waiting times count from each job's submission: with the same needs, the job that has waited
  // longer is planned first (97^2 + 108^2 > 98^2 + 107^2).
  PolicyDriver d("plan-based", machine(10));
  const AppId r = d.reg(job("r", 10, 100), 0);
  const AppId older = d.reg(job("older", 10, 10), 2);
  d.reg(job("younger", 10, 10), 3);
  d.end(r, 100);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, older}));
}

TEST(PlanBased, StartsEveryJobThePlanStartsNowAndReservesTheRest) {
  // 10 nodes, R holds 6 until t = 100. Waiting: W (8 nodes, since t = 1) and two of 2 nodes
  // that end before t = 100. The plan puts W at t = 100 and the two small jobs now, beside it.
  PolicyDriver d("plan-based", machine(10));
  const AppId r = d.reg(job("r", 6, 100), 0);
  const AppId w = d.reg(job("w", 8, 100), 1);
  const AppId a = d.scheduler->on_app_register(job("a", 2, 50), 2);
  const AppId b = d.scheduler->on_app_register(job("b", 2, 90), 2);
  d.scheduler->on_tick(2);
  EXPECT_TRUE(d.actions.was_admitted(a));
  EXPECT_TRUE(d.actions.was_admitted(b));
  EXPECT_FALSE(d.actions.was_admitted(w));
  d.end(a, 50);
  d.end(b, 60);
  EXPECT_FALSE(d.actions.was_admitted(w)) << "R still holds 6 nodes";
  d.end(r, 100);
  EXPECT_TRUE(d.actions.was_admitted(w));
}

TEST(PlanBased, ALongQueueIsSearchedAndStillPutsTheWideJobLast) {
  // Eight jobs wait when R ends: the search (sorted orders, then annealing) replaces the
  // exhaustive one. The wide job, submitted first, would hold all 10 nodes for 1000 s; the seven
  // narrow jobs of 1 node and 20 s fit beside nothing else. The best plan runs the narrow ones
  // first: with the wide first, each narrow job would wait 1000 s more.
  PolicyDriver d("plan-based", machine(10));
  const AppId r = d.reg(job("r", 10, 100), 0);
  const AppId wide = d.reg(job("wide", 10, 1000), 1);
  std::vector<AppId> narrow;
  for (int k = 0; k < 7; ++k) narrow.push_back(d.reg(job("n" + std::to_string(k), 1, 20), 2));
  d.end(r, 100);
  for (AppId n : narrow) EXPECT_TRUE(d.actions.was_admitted(n)) << n;
  EXPECT_FALSE(d.actions.was_admitted(wide));
}

TEST(PlanBased, AReservationDepthKeepsTheFirstInLineFromBeingOvertaken) {
  // As in the first test with alpha 1, which takes the short jobs first; with depth 1, L, first
  // in line, is reserved the machine at t = 100 and the short jobs follow it.
  PolicyDriver d("plan-based", machine(10, 1.0, 1));
  const AppId r = d.reg(job("r", 10, 100), 0);
  const AppId l = d.reg(job("l", 10, 30), 0);
  d.reg(job("s1", 10, 10), 95);
  d.reg(job("s2", 10, 10), 95);
  d.end(r, 100);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, l}));
}

TEST(PlanBased, PlansBurstBufferCapacityLikeNodes) {
  // Capacity, not nodes, holds the jobs back: 1000 GB, R holds 900 GB until t = 100; the plan
  // starts now the job that fits in the 100 GB left and ends before R, not the older big one.
  PolicyDriver d("plan-based", machine(100));
  const AppId r = d.reg(job("r", 1, 100, 900 * GB), 0);
  const AppId big = d.reg(job("big", 1, 100, 500 * GB), 1);
  const AppId small = d.reg(job("small", 1, 50, 80 * GB), 2);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, small}));
  EXPECT_FALSE(d.actions.was_admitted(big));
}
