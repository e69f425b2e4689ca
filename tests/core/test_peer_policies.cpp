// The defining rule of each peer policy (docs/scheduling-model.md section 8), driven event by
// event: each test fails if the rule is replaced (IO-Sets' grouping by order of magnitude and its
// priority, ThemisIO's token shares and draws, EASY's reservation for the queue head and its
// backfilling, processor sharing's no-wait rule).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/policies/policies.hpp"
#include "core/policies/shares.hpp"
#include "core/registry.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig config(int buffers, double capacity, uint64_t seed = 1) {
  SchedulerConfig c = ssd_buffers(buffers, capacity);
  c.max_colocated = 1;  // the peers ignore X; a test with X = 1 shows it
  c.seed = seed;
  return c;
}

AppInfo job(const std::string& name, int nodes = 1, const std::string& user = "",
            double declared = 10 * GB, double walltime = 0) {
  AppInfo info;
  info.name = name;
  info.nodes = nodes;
  info.declared_bytes = declared;
  info.user = user;
  info.walltime = walltime;
  return info;
}

using Driver = PolicyDriver;

size_t buffers_of(const Driver& d, AppId app) {
  const auto* g = d.actions.grant_of(app);
  return g ? g->buffers.size() : 0;
}

}  // namespace

TEST(Apportion, MinimumFirstThenByWeightLargestRemainder) {
  EXPECT_EQ(apportion({1, 1}, 4, 1), (std::vector<int>{2, 2}));
  EXPECT_EQ(apportion({7, 1}, 4, 1), (std::vector<int>{3, 1}));
  EXPECT_EQ(apportion({0.5, 0.5, 1}, 8, 1), (std::vector<int>{2, 2, 4}));
  EXPECT_EQ(apportion({1, 1, 1}, 8, 1), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(apportion({1, 1, 1}, 2, 1), (std::vector<int>{1, 1, 1})) << "more claimants than room";
}

TEST(FairShare, StartsEveryPhaseAtOnceOnEveryBufferWhateverX) {
  Driver d("fair-share", config(2, 500 * GB));
  for (int i = 0; i < 4; ++i) d.reg(job("j" + std::to_string(i)), 0);
  d.request_together({0, 1, 2, 3}, 10 * GB, 1);
  ASSERT_EQ(d.actions.grants.size(), 4u) << "processor sharing: nobody waits for anybody";
  for (const auto& g : d.actions.grants) EXPECT_EQ(g.buffers, (std::vector<BufferId>{0, 1}));
  EXPECT_EQ(d.scheduler->buffers()[0].phases, 4);
}

TEST(FairShare, WaitsOnlyForSpace) {
  Driver d("fair-share", config(2, 10 * GB));
  d.reg(job("a"), 0);
  d.reg(job("b"), 0);
  d.request_together({0}, 16 * GB, 1);
  d.request_together({1}, 8 * GB, 2);
  ASSERT_EQ(d.actions.grants.size(), 1u) << "8 GB more does not fit in the 4 GB left";
  d.complete(0, 0, 3);
  d.drained(0, 8 * GB, 4);
  d.drained(1, 8 * GB, 5);
  EXPECT_EQ(d.actions.grants.size(), 2u);
}

TEST(IoSets, SetOfIsTheOrderOfMagnitude) {
  EXPECT_EQ(io_set_of(5.5), 0);
  EXPECT_EQ(io_set_of(10), 1);
  EXPECT_EQ(io_set_of(50.5), 1);
  EXPECT_EQ(io_set_of(99.9), 1);
  EXPECT_EQ(io_set_of(500.5), 2);
  EXPECT_EQ(io_set_of(0.5), -1);
}

TEST(IoSets, SameOrderOfMagnitudeTakesTurns) {
  // Iterations of about 80 s and 50 s: both in set 1, so one writes at a time, first come first
  // served, even though buffers are free.
  Driver d("io-sets", config(4, 500 * GB));
  const AppId a = d.reg(job("a"), 0);
  const AppId b = d.reg(job("b"), 30);
  d.request_together({a}, 1 * GB, 80);
  d.request_together({b}, 1 * GB, 80);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  EXPECT_EQ(d.actions.grants[0].app, a);
  EXPECT_EQ(d.actions.grants[0].buffers.size(), 4u) << "alone in line: every buffer";
  d.complete(a, 0, 81);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[1].app, b);
}

TEST(IoSets, DifferentOrdersShareTheBuffersShorterFirst) {
  // Iterations of about 5 s (set 0) and 500 s (set 2) run side by side; set 0 weighs 100 times
  // more, so it gets all but the one buffer set 2 needs.
  Driver d("io-sets", config(4, 500 * GB));
  const AppId slow = d.reg(job("slow"), 0);
  const AppId fast = d.reg(job("fast"), 495);
  d.request_together({slow, fast}, 1 * GB, 500);
  ASSERT_EQ(d.actions.grants.size(), 2u) << "different sets do not wait for each other";
  EXPECT_EQ(buffers_of(d, fast), 3u);
  EXPECT_EQ(buffers_of(d, slow), 1u);
}

TEST(IoSets, CharacteristicTimeIsTheMeanOverIterations) {
  // A's iterations take about 150 s then 5 s: their mean (about 78 s) puts it in set 1, apart
  // from B (about 5 s, set 0), so they write side by side. Judged on its last iteration alone, A
  // would share set 0 with B and wait for it.
  Driver d("io-sets", config(4, 500 * GB));
  const AppId a = d.reg(job("a"), 0);
  d.request_together({a}, 1 * GB, 150);
  d.complete(a, 0, 201);
  const AppId b = d.reg(job("b"), 201);
  d.scheduler->on_phase_request({a, 1, 1 * GB, Op::Write, 0}, 206);
  d.scheduler->on_phase_request({b, 0, 1 * GB, Op::Write, 0}, 206);
  d.scheduler->on_tick(206);
  EXPECT_EQ(d.actions.grants.size(), 3u) << "A (set 1) and B (set 0) write side by side";
  EXPECT_EQ(d.actions.grants.back().buffers.size() + d.actions.grants[1].buffers.size(), 4u);
  EXPECT_EQ(buffers_of(d, b), 3u) << "the shorter set has the larger share";
}

TEST(ThemisIo, JobFairSplitsTheBuffersEqually) {
  Driver d("themisio-job", config(4, 500 * GB));
  const AppId big = d.reg(job("big", 7), 0);
  const AppId small = d.reg(job("small", 1), 0);
  d.request_together({big, small}, 4 * GB, 1);
  EXPECT_EQ(buffers_of(d, big), 2u);
  EXPECT_EQ(buffers_of(d, small), 2u);
}

TEST(ThemisIo, SizeFairSplitsByNodeCount) {
  Driver d("themisio-size", config(4, 500 * GB));
  const AppId big = d.reg(job("big", 7), 0);
  const AppId small = d.reg(job("small", 1), 0);
  d.request_together({big, small}, 4 * GB, 1);
  EXPECT_EQ(buffers_of(d, big), 3u);
  EXPECT_EQ(buffers_of(d, small), 1u);
}

TEST(ThemisIo, UserFairSplitsByUserThenAmongTheirJobs) {
  for (const auto& [policy, alice_each, bob] :
       {std::tuple{"themisio-user", 2u, 4u}, std::tuple{"themisio-job", 3u, 2u}}) {
    Driver d(policy, config(8, 500 * GB));
    const AppId a1 = d.reg(job("a1", 1, "alice"), 0);
    const AppId a2 = d.reg(job("a2", 1, "alice"), 0);
    const AppId b1 = d.reg(job("b1", 1, "bob"), 0);
    d.request_together({a1, a2, b1}, 8 * GB, 1);
    EXPECT_EQ(buffers_of(d, a1), alice_each) << policy;
    EXPECT_EQ(buffers_of(d, a2), alice_each) << policy;
    EXPECT_EQ(buffers_of(d, b1), bob) << policy;
  }
}

TEST(ThemisIo, NextJobIsDrawnInProportionToTokens) {
  // One buffer, a 9-node and a 1-node job asking at once: who goes first is a weighted draw,
  // 9 to 1 under size-fair, even under job-fair; over 400 seeds the frequencies show it.
  for (const auto& [policy, low, high] :
       {std::tuple{"themisio-size", 0.84, 0.96}, std::tuple{"themisio-job", 0.42, 0.58}}) {
    int big_first = 0;
    for (uint64_t seed = 1; seed <= 400; ++seed) {
      Driver d(policy, config(1, 500 * GB, seed));
      const AppId small = d.reg(job("small", 1), 0);
      const AppId big = d.reg(job("big", 9), 0);
      d.request_together({small, big}, 4 * GB, 1);
      ASSERT_EQ(d.actions.grants.size(), 1u);
      big_first += d.actions.grants[0].app == big ? 1 : 0;
    }
    const double share = big_first / 400.0;
    EXPECT_GT(share, low) << policy;
    EXPECT_LT(share, high) << policy;
  }
}

TEST(ThemisIo, IdleJobsTokensGoToTheOthers) {
  // Opportunity fairness: the 7-node job computes, so the 1-node job gets every buffer.
  Driver d("themisio-size", config(4, 500 * GB));
  d.reg(job("big", 7), 0);
  const AppId small = d.reg(job("small", 1), 0);
  d.request_together({small}, 4 * GB, 1);
  EXPECT_EQ(buffers_of(d, small), 4u);
}

TEST(SlurmEasy, BackfillsOnlyWhatCannotDelayTheHeadsReservation) {
  // 100 GB of burst buffer. R holds 60 GB until t = 100 (its limit). H, first in line, needs
  // 80 GB: its reservation is at t = 100, when 100 GB are free, 20 GB more than it needs.
  Driver d("slurm-easy", config(2, 50 * GB));
  const AppId r = d.reg(job("r", 1, "", 60 * GB, 100), 0);
  const AppId h = d.reg(job("h", 1, "", 80 * GB, 100), 1);
  // Fits now, but runs past t = 100 and needs more than the 20 GB extra: would delay H.
  const AppId late = d.reg(job("late", 1, "", 30 * GB, 500), 2);
  // Ends by t = 53, before the reservation: backfilled.
  const AppId quick = d.reg(job("quick", 1, "", 30 * GB, 50), 3);
  // Runs long, but fits in the extra 20 GB: backfilled.
  const AppId small = d.reg(job("small", 1, "", 10 * GB, 1000), 4);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick, small}));

  // R ends (it wrote nothing, so its stage-out is done at once): H needs 80 GB, 60 are free
  // while quick and small run.
  d.end(r, 90);
  EXPECT_EQ(d.actions.admitted.size(), 3u);
  d.end(quick, 96);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick, small, h}));
  EXPECT_EQ(std::count(d.actions.admitted.begin(), d.actions.admitted.end(), late), 0);
}

TEST(SlurmEasy, WithoutBackfillRoomKeepsSubmissionOrder) {
  // Nothing fits beside the head's reservation: jobs start in submission order, like DataWarp.
  Driver d("slurm-easy", config(2, 50 * GB));
  const AppId r = d.reg(job("r", 1, "", 90 * GB, 100), 0);
  d.reg(job("h", 1, "", 90 * GB, 100), 1);
  d.reg(job("x", 1, "", 20 * GB, 500), 2);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r}));
}
