// Jobs on a machine they share (SchedulerConfig::compute_nodes, docs/scheduling-model.md section
// 5): a job starts once nodes are free for it, first come first served, and later jobs backfill
// around the first in line without delaying it (EASY). The batch-reservation policies weigh
// nodes and burst-buffer capacity together; slurm-easy-sjf backfills the shortest first.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig machine(int nodes, double buffer_capacity = 500 * GB) {
  return shared_machine(nodes, buffer_capacity);
}

AppInfo job(const std::string& name, int nodes, double walltime, double declared = 10 * GB) {
  return batch_job(name, nodes, walltime, declared);
}

bool admitted(const PolicyDriver& d, AppId app) { return d.actions.was_admitted(app); }

}  // namespace

TEST(BatchQueue, JobsWaitForNodesAndBackfillAroundTheFirstInLine) {
  // 10 nodes. R holds 8 until t = 100 (its limit). H, first in line, needs 9: it is reserved
  // the whole machine at t = 100, one node more than it needs.
  PolicyDriver d("fair-share", machine(10));
  const AppId r = d.reg(job("r", 8, 100), 0);
  const AppId h = d.reg(job("h", 9, 100), 1);
  // Fits in the 2 free nodes but runs past t = 100 and needs more than the 1 extra node.
  const AppId late = d.reg(job("late", 2, 500), 2);
  // Fits and ends by t = 53, before the reservation: backfilled.
  const AppId quick = d.reg(job("quick", 2, 50), 3);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick}));
  EXPECT_EQ(d.scheduler->free_nodes(), 0);

  d.end(quick, 40);
  EXPECT_FALSE(admitted(d, late)) << "it would hold a node H needs at t = 100";
  EXPECT_FALSE(admitted(d, h));
  d.end(r, 90);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick, h}));
  EXPECT_EQ(d.scheduler->free_nodes(), 1);
  d.end(h, 150);
  EXPECT_TRUE(admitted(d, late));
}

TEST(BatchQueue, FirstComeFirstServedWhenNothingCanBackfill) {
  // 4 nodes: A holds 3 until t = 100; B, first in line, needs all 4 then (no extra node); C fits
  // in the free node now but would still hold it at t = 100.
  PolicyDriver d("fair-share", machine(4));
  const AppId a = d.reg(job("a", 3, 100), 0);
  const AppId b = d.reg(job("b", 4, 100), 1);
  const AppId c = d.reg(job("c", 1, 1000), 2);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a}));
  d.end(a, 50);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b}));
  d.end(b, 60);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b, c}));
}

TEST(BatchQueue, WithoutASharedMachineEveryJobStartsAtOnce) {
  SchedulerConfig c = ssd_buffers(2, 500 * GB);
  PolicyDriver d("fair-share", c);
  for (int k = 0; k < 5; ++k) d.reg(job("j" + std::to_string(k), 1000, 10), k);
  EXPECT_EQ(d.actions.admitted.size(), 5u);
}

TEST(BatchQueue, RefusesAJobLargerThanTheMachine) {
  PolicyDriver d("fair-share", machine(8));
  EXPECT_THROW(d.reg(job("huge", 9, 10), 0), std::invalid_argument);
}

TEST(BatchQueue, DataWarpWaitsForNodesInSubmissionOrder) {
  // Capacity is plentiful: only nodes hold jobs back, and the first in line blocks the others.
  PolicyDriver d("datawarp", machine(4));
  const AppId a = d.reg(job("a", 3, 100), 0);
  const AppId b = d.reg(job("b", 2, 100), 1);
  const AppId c = d.reg(job("c", 1, 10), 2);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a}));
  d.end(a, 50);  // its stage-out is done at once: it wrote nothing
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b, c}));
}

TEST(BatchQueue, SlurmEasyReservesNodesAndCapacityTogether) {
  // 1000 GB of buffers, 10 nodes. R holds 8 nodes and 100 GB until t = 100. H, first in line,
  // needs 2 nodes (free now) but 970 GB: it waits for R's capacity, and its reservation at
  // t = 100 leaves 8 nodes and 30 GB extra.
  PolicyDriver d("slurm-easy", machine(10));
  const AppId r = d.reg(job("r", 8, 100, 100 * GB), 0);
  const AppId h = d.reg(job("h", 2, 100, 970 * GB), 1);
  // Runs past t = 100 and needs more than the 30 GB extra: would delay H.
  const AppId big = d.reg(job("big", 2, 1000, 40 * GB), 2);
  // Runs past t = 100, fits in the extra of both: backfilled.
  const AppId fits = d.reg(job("fits", 2, 1000, 20 * GB), 3);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, fits}));
  // R ends (it wrote nothing: its stage-out is done at once) and H gets what it was reserved.
  d.end(r, 90);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, fits, h}));
  EXPECT_EQ(d.scheduler->free_nodes(), 6);
  EXPECT_FALSE(admitted(d, big)) << "beside H's 970 GB";
}

TEST(BatchQueue, SlurmEasyKeepsNodesForTheFirstInLine) {
  // 10 nodes, capacity plentiful: R holds 8 nodes until t = 100; H needs all 10 then.
  PolicyDriver d("slurm-easy", machine(10));
  const AppId r = d.reg(job("r", 8, 100), 0);
  const AppId h = d.reg(job("h", 10, 100), 1);
  const AppId late = d.reg(job("late", 2, 500), 2);  // would hold 2 of H's nodes at t = 100
  const AppId quick = d.reg(job("quick", 2, 90), 3);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick}));
  d.end(quick, 50);
  d.end(r, 60);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{r, quick, h}));
  EXPECT_FALSE(admitted(d, late));
}

TEST(BatchQueue, SlurmEasySjfBackfillsTheShortestFirst) {
  // 10 nodes: R holds 8 until t = 1000, Q the other 2 until t = 50. H, first in line, needs 10.
  // When Q ends, two jobs of 2 nodes could each backfill before H's reservation, but only one
  // fits: submission order takes the first in line, SJF the shorter.
  for (const std::string policy : {"slurm-easy", "slurm-easy-sjf"}) {
    PolicyDriver d(policy, machine(10));
    d.reg(job("r", 8, 1000), 0);
    const AppId q = d.reg(job("q", 2, 50), 0);
    d.reg(job("h", 10, 100), 1);
    const AppId longer = d.reg(job("longer", 2, 500), 2);
    const AppId shorter = d.reg(job("shorter", 2, 50), 3);
    EXPECT_EQ(d.actions.admitted.size(), 2u) << policy;
    d.end(q, 40);
    EXPECT_EQ(admitted(d, longer), policy == "slurm-easy") << policy;
    EXPECT_EQ(admitted(d, shorter), policy == "slurm-easy-sjf") << policy;
  }
}

TEST(BatchQueue, IoSetsQueuesForNodesOnASharedMachine) {
  // IO-Sets admits every job at once; on a shared machine the jobs still wait for nodes.
  PolicyDriver d("io-sets", machine(4));
  const AppId a = d.reg(job("a", 3, 100), 0);
  const AppId b = d.reg(job("b", 3, 100), 1);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a}));
  d.end(a, 50);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b}));
}

TEST(WorkConservation, APhaseLargerThanItsShareStartsWhenNothingElseCan) {
  // priority shares the free buffers equally among the phases of a level: 4 buffers of 100 GB,
  // two phases of 250 GB and 10 GB get 2 buffers each, and 250 GB does not fit on 2. Nothing
  // runs and nothing is left to drain, so no wait can free space: the oldest starts on the 3
  // buffers that hold it.
  SchedulerConfig c = ssd_buffers(4, 100 * GB);
  PolicyDriver d("priority", c);
  const AppId big = d.reg(job("big", 1, 0), 0);
  const AppId small = d.reg(job("small", 1, 0), 0);
  d.scheduler->on_phase_request({big, 0, 250 * GB, Op::Write, 0}, 1);
  d.scheduler->on_phase_request({small, 0, 10 * GB, Op::Write, 0}, 1);
  d.scheduler->on_tick(1);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  EXPECT_EQ(d.actions.grants[0].app, big);
  EXPECT_EQ(d.actions.grants[0].buffers.size(), 3u);
}
