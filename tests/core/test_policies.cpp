// Hand-checked decisions of each policy on small cases, driven event by event.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/registry.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig config(int buffers, double capacity, int max_colocated = 3) {
  SchedulerConfig c = ssd_buffers(buffers, capacity);
  c.max_colocated = max_colocated;
  return c;
}

AppInfo app(const std::string& name, int priority = 0, double declared = 20e9) {
  return {.name = name, .nodes = 4, .priority = priority, .declared_bytes = declared};
}

/// Delivers events one instant at a time, then lets the policy decide, as a host does.
using Driver = PolicyDriver;

}  // namespace

TEST(Registry, KnowsEveryPolicyAndRejectsUnknown) {
  const auto names = policy_names();
  EXPECT_EQ(names.size(), 15u);  // six of the paper, eight peers, auto
  EXPECT_EQ(names.front(), "datawarp");
  RecordingActions actions;
  EXPECT_THROW(make_scheduler("nope", config(2, 100 * GB), actions), std::invalid_argument);
}

TEST(DataWarp, ReservesWholeJobCapacityFirstComeFirstServed) {
  Driver d("datawarp", config(2, 50 * GB));
  // 100 GB of buffers; each job declares 60 GB: only one fits at a time.
  const AppId a = d.reg(app("a", 0, 60 * GB), 0);
  const AppId b = d.reg(app("b", 0, 60 * GB), 0);
  EXPECT_EQ(d.actions.admitted, std::vector<AppId>{a});
  // Phases go at once to every buffer.
  d.request(a, 0, 10 * GB, 1);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  EXPECT_EQ(d.actions.grants[0].buffers, (std::vector<BufferId>{0, 1}));
  d.complete(a, 0, 2);
  EXPECT_TRUE(d.actions.drain_starts.empty()) << "DataWarp stages out only at job end";
  d.end(a, 3);
  EXPECT_EQ(d.actions.drain_starts.size(), 2u);
  EXPECT_EQ(d.actions.admitted.size(), 1u) << "b waits for a's stage-out";
  d.drained(0, 5 * GB, 4);
  d.drained(1, 5 * GB, 5);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b}));
}

TEST(DataWarp, IgnoresInterferenceAndColocatesEveryone) {
  Driver d("datawarp", config(2, 500 * GB, 1));
  for (int i = 0; i < 4; ++i) d.reg(app("x" + std::to_string(i)), 0);
  for (int i = 0; i < 4; ++i) d.request(i, 0, 10 * GB, 1);
  EXPECT_EQ(d.actions.grants.size(), 4u);
  EXPECT_EQ(d.buffers()[0].phases, 4);
}

TEST(MaxBandwidth, RunsPhasesExclusivelyAndPausesDrains) {
  Driver d("max-bandwidth", config(2, 500 * GB));
  d.reg(app("a"), 0);
  d.reg(app("b"), 0);
  d.request_together({0, 1}, 10 * GB, 1);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  EXPECT_EQ(d.actions.grants[0].buffers.size(), 2u) << "one phase on both buffers";
  const AppId first = d.actions.grants[0].app;
  d.complete(first, 0, 20);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[1].app, 1 - first);
  // Drains yield to I/O: the first phase's data waits while the second phase writes.
  EXPECT_TRUE(d.actions.drain_starts.empty());
  d.complete(1 - first, 0, 40);
  EXPECT_EQ(d.actions.drain_starts.size(), 2u);
}

TEST(Fairness, StartsAllSixAppsOfFig5AtOnce) {
  // Paper IV-B4: 6 apps, 2 buffers, at most 3 per buffer: all six start together.
  Driver d("fairness", config(2, 20 * GB));
  for (int i = 0; i < 6; ++i) d.reg(app("app" + std::to_string(i)), 0);
  d.request_together({0, 1, 2, 3, 4, 5}, 5 * GB, 0);
  EXPECT_EQ(d.actions.grants.size(), 6u);
  EXPECT_EQ(d.buffers()[0].phases, 3);
  EXPECT_EQ(d.buffers()[1].phases, 3);
}

TEST(MinStall, SpreadsPhasesOverIdleBuffersWithoutColocation) {
  // Paper IV-B5: app 1 on the first buffer, app 2 on the other.
  Driver d("min-stall", config(2, 100 * GB));
  d.reg(app("a"), 0);
  d.reg(app("b"), 0);
  d.request_together({0, 1}, 10 * GB, 0);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[0].buffers.size(), 1u);
  EXPECT_EQ(d.actions.grants[1].buffers.size(), 1u);
  EXPECT_NE(d.actions.grants[0].buffers, d.actions.grants[1].buffers);
}

TEST(MaxBufferEfficiency, OnePhaseOnAllBuffersOthersOverlapCompute) {
  // Paper IV-B1: app 1 runs on both buffers; app 2 waits for them.
  Driver d("max-buffer-efficiency", config(2, 100 * GB));
  d.reg(app("a"), 0);
  d.reg(app("b"), 0);
  d.request(0, 0, 10 * GB, 0);
  d.request(1, 0, 10 * GB, 1);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  EXPECT_EQ(d.actions.grants[0].buffers, (std::vector<BufferId>{0, 1}));
  d.complete(0, 0, 10);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[1].app, 1);
  // Flushing starts as soon as data is there (threshold 0) and overlaps app b's I/O.
  EXPECT_TRUE(d.buffers()[0].draining);
}

TEST(Priority, HigherPriorityFirstAndNeverInterrupted) {
  Driver d("priority", config(4, 100 * GB));
  for (int p : {3, 5, 3}) d.reg(app("p" + std::to_string(p), p), 0);
  d.request(0, 0, 10 * GB, 0, 3);
  EXPECT_EQ(d.actions.grants.size(), 1u) << "alone, a phase starts at once";
  EXPECT_EQ(d.actions.grants[0].buffers.size(), 4u) << "exclusively, on every buffer";
  // While it runs, a priority-3 and a priority-5 phase arrive; the running one is not stopped.
  d.request(2, 0, 10 * GB, 6, 3);
  d.request(1, 0, 10 * GB, 7, 5);
  ASSERT_EQ(d.actions.grants.size(), 1u);
  d.complete(0, 0, 10);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[1].app, 1) << "priority 5 before the earlier priority 3";
  EXPECT_EQ(d.actions.grants[1].buffers.size(), 4u);
}

TEST(Priority, EqualPrioritiesShareOrQueue) {
  for (auto tie : {PriorityTie::Share, PriorityTie::Fcfs}) {
    auto cfg = config(4, 100 * GB);
    cfg.priority_tie = tie;
    Driver d("priority", cfg);
    d.reg(app("blocker", 9), 0);
    d.reg(app("a", 1), 0);
    d.reg(app("b", 1), 0);
    d.request(0, 0, 10 * GB, 0, 9);
    d.request(1, 0, 10 * GB, 1, 1);
    d.request(2, 0, 10 * GB, 1, 1);
    d.complete(0, 0, 5);
    if (tie == PriorityTie::Share) {
      ASSERT_EQ(d.actions.grants.size(), 3u);
      EXPECT_EQ(d.actions.grants[1].buffers.size(), 2u);
      EXPECT_EQ(d.actions.grants[2].buffers.size(), 2u);
    } else {
      ASSERT_EQ(d.actions.grants.size(), 2u);
      EXPECT_EQ(d.actions.grants[1].app, 1);
      EXPECT_EQ(d.actions.grants[1].buffers.size(), 4u);
    }
  }
}

TEST(Drains, ThresholdDelaysDrainingUntilFillReached) {
  auto cfg = config(1, 100 * GB);
  cfg.flush_threshold = 0.5;
  Driver d("min-stall", cfg);
  d.reg(app("a"), 0);
  d.request(0, 0, 30 * GB, 0);
  d.complete(0, 0, 10);
  EXPECT_TRUE(d.actions.drain_starts.empty()) << "30 % full, threshold 50 %";
  d.request(0, 1, 30 * GB, 20);
  d.complete(0, 1, 30);
  EXPECT_EQ(d.actions.drain_starts, std::vector<BufferId>{0});
  d.drained(0, 60 * GB, 40);
  EXPECT_EQ(d.actions.drain_stops, std::vector<BufferId>{0});
  EXPECT_DOUBLE_EQ(d.buffers()[0].used, 0.0);
}

TEST(Drains, CapacityPressureForcesDrainBelowThreshold) {
  auto cfg = config(1, 100 * GB);
  cfg.flush_threshold = 1.0;
  Driver d("min-stall", cfg);
  d.reg(app("a"), 0);
  d.request(0, 0, 60 * GB, 0);
  d.complete(0, 0, 10);
  EXPECT_TRUE(d.actions.drain_starts.empty());
  d.request(0, 1, 60 * GB, 20);
  EXPECT_EQ(d.actions.grants.size(), 1u) << "does not fit";
  EXPECT_EQ(d.actions.drain_starts, std::vector<BufferId>{0}) << "pressure drains";
  d.drained(0, 60 * GB, 30);
  EXPECT_EQ(d.actions.grants.size(), 2u);
}

TEST(Drains, BackupFlusherTakesNoNewIo) {
  auto cfg = config(2, 100 * GB);
  cfg.flush_threshold = 0.25;
  cfg.backup_flushers = 1;
  Driver d("min-stall", cfg);
  d.reg(app("a"), 0);
  d.request(0, 0, 60 * GB, 0);  // 30 GB on each buffer
  ASSERT_EQ(d.actions.grants[0].buffers.size(), 2u);
  d.complete(0, 0, 10);
  // Both buffers are over 25 %; only one becomes the flusher.
  ASSERT_EQ(d.actions.drain_starts.size(), 1u);
  const BufferId flusher = d.actions.drain_starts[0];
  EXPECT_TRUE(d.buffers()[static_cast<size_t>(flusher)].exclusive_flush);
  d.request(0, 1, 10 * GB, 20);
  ASSERT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.grants[1].buffers, std::vector<BufferId>{1 - flusher});
}

TEST(Drains, CachedDataStaysUntilItsApplicationEnds) {
  Driver d("fairness", config(2, 100 * GB));
  const AppId reader = d.reg({.name = "reader", .hint = Hint::Cached}, 0);
  const AppId other = d.reg(app("other"), 0);
  d.request(reader, 0, 10 * GB, 0);
  d.complete(reader, 0, 5);
  EXPECT_TRUE(d.actions.drain_starts.empty()) << "cached data is kept for later reads";
  d.request(other, 0, 10 * GB, 6);
  EXPECT_EQ(d.actions.grants.size(), 1u) << "buffers with cached data take no other job";
  d.end(reader, 7);
  EXPECT_FALSE(d.actions.drain_starts.empty());
  EXPECT_EQ(d.actions.grants.size(), 2u);
}

TEST(Scheduler, RejectsOutOfOrderEvents) {
  RecordingActions actions;
  auto s = make_scheduler("fairness", config(2, 100 * GB), actions);
  s->on_app_register(app("a"), 0);
  EXPECT_THROW(s->on_phase_complete(0, 0, 1), std::logic_error);
  s->on_app_end(0, 2);
  EXPECT_THROW(s->on_phase_request({0, 0, GB, Op::Write, 0}, 3), std::logic_error);
  EXPECT_THROW(s->on_app_end(0, 4), std::logic_error);
}

TEST(Scheduler, ReadPhasesFreeTheirSpaceWithoutDraining) {
  Driver d("min-stall", config(1, 100 * GB));
  d.reg(app("a"), 0);
  d.scheduler->on_phase_request({0, 0, 40 * GB, Op::Read, 0}, 0);
  d.scheduler->on_tick(0);
  EXPECT_DOUBLE_EQ(d.buffers()[0].used, 40 * GB);
  d.scheduler->on_prefetched(0, 0, 5);  // its data staged in from the PFS
  d.scheduler->on_tick(5);
  d.complete(0, 0, 10);
  EXPECT_DOUBLE_EQ(d.buffers()[0].used, 0.0);
  EXPECT_TRUE(d.actions.drain_starts.empty());
}

TEST(Priority, PhaseThatDoesNotFitItsShareMakesBuffersDrain) {
  // Threshold 100 %: drains start only under pressure. Two equal-priority phases share the four
  // buffers two by two; the first share is too full, although the phase would fit striped over all
  // four buffers. The policy's own refusal must count as pressure, or nothing ever moves.
  auto cfg = config(4, 100 * GB);
  cfg.flush_threshold = 1.0;
  Driver d("priority", cfg);
  d.reg(app("a", 1), 0);
  d.reg(app("b", 1), 0);
  d.request(0, 0, 160 * GB, 0, 1);  // 40 GB on each buffer
  d.complete(0, 0, 10);
  d.request(0, 1, 160 * GB, 11, 1);  // 80 GB on each buffer
  d.complete(0, 1, 20);
  // 45 GB per buffer of a two-buffer share: no room on any buffer.
  d.scheduler->on_phase_request({0, 2, 90 * GB, Op::Write, 1}, 30);
  d.scheduler->on_phase_request({1, 0, 90 * GB, Op::Write, 1}, 30);
  d.scheduler->on_tick(30);
  EXPECT_EQ(d.actions.grants.size(), 2u);
  EXPECT_EQ(d.actions.drain_starts.size(), 4u);
}

TEST(HeldReports, TheBuffersCountReplacesTheDeclaredOne) {
  auto cfg = config(2, 100 * GB);
  cfg.flush_threshold = 1.0;
  Driver d("min-stall", cfg);
  const AppId a = d.reg(app("a"), 0);
  d.request(a, 0, 20 * GB, 0);
  ASSERT_EQ(d.actions.grants.at(0).buffers.size(), 2u);
  // While the phase runs the policy counts its reservation, whatever arrived so far.
  d.scheduler->on_held_reported(0, a, 1 * GB, 1);
  EXPECT_DOUBLE_EQ(d.buffers()[0].used, 10 * GB);
  d.complete(a, 0, 2);
  // Buffer 1 died during the phase: its client wrote everything to buffer 0.
  d.scheduler->on_held_reported(0, a, 18 * GB, 3);
  d.scheduler->on_held_reported(1, a, 2 * GB, 3);
  EXPECT_DOUBLE_EQ(d.buffers()[0].used, 18 * GB);
  EXPECT_DOUBLE_EQ(d.buffers()[1].used, 2 * GB);
  EXPECT_DOUBLE_EQ(d.scheduler->apps()[0].held_bytes, 20 * GB);
  d.end(a, 4);
  ASSERT_EQ(d.actions.drain_starts.size(), 2u) << "nothing runs any more: everything drains";
  d.drained(0, 10 * GB, 5);
  EXPECT_EQ(d.actions.drain_stops.size(), 0u) << "8 GB are still on buffer 0";
  d.drained(0, 8 * GB, 6);
  d.drained(1, 2 * GB, 6);
  EXPECT_EQ(d.actions.drain_stops.size(), 2u);
  EXPECT_DOUBLE_EQ(d.scheduler->apps()[0].held_bytes, 0.0);
}

TEST(HeldReports, DataNoPhasePlacedOnABufferIsCountedAndDrains) {
  Driver d("min-stall", config(2, 100 * GB));
  const AppId a = d.reg(app("a"), 0);
  d.end(a, 1);
  d.scheduler->on_held_reported(1, a, 3 * GB, 2);
  d.scheduler->on_tick(2);
  EXPECT_DOUBLE_EQ(d.buffers()[1].drainable(), 3 * GB);
  EXPECT_EQ(d.actions.drain_starts, std::vector<BufferId>{1});
}

TEST(HeldReports, AStagedOutJobFreesItsReservationOnce) {
  Driver d("datawarp", config(1, 50 * GB));
  const AppId a = d.reg(app("a", 0, 30 * GB), 0);
  const AppId b = d.reg(app("b", 0, 30 * GB), 0);
  const AppId c = d.reg(app("c", 0, 20 * GB), 0);
  EXPECT_EQ(d.actions.admitted, std::vector<AppId>{a});
  d.request(a, 0, 10 * GB, 1);
  d.complete(a, 0, 2);
  d.end(a, 3);
  d.drained(0, 10 * GB, 4);
  EXPECT_EQ(d.actions.admitted, (std::vector<AppId>{a, b, c}));
  // A late report of data of a left over (a stale client wrote after all): it is counted and
  // drains, but a's reservation is not given back a second time.
  d.scheduler->on_held_reported(0, a, 1 * GB, 5);
  d.drained(0, 1 * GB, 6);
  const AppId e = d.reg(app("e", 0, 1 * GB), 7);
  EXPECT_EQ(d.actions.admitted.size(), 3u) << "b and c hold all 50 GB: e waits";
  (void)e;
}

TEST(PhaseBound, OneLongPhaseLeavesBuffersForTheNextJob) {
  // max-bandwidth runs one phase per buffer: a job in a long phase on every buffer keeps the
  // others waiting until it ends. With at most 2 of the 4 buffers per phase, b starts at once.
  for (const int bound : {0, 2}) {
    SchedulerConfig c = config(4, 100 * GB);
    c.max_phase_buffers = bound;
    Driver d("max-bandwidth", c);
    const AppId a = d.reg(app("a"), 0);
    const AppId b = d.reg(app("b"), 0);
    d.request(a, 0, 200 * GB, 1);
    d.request(b, 0, 1 * GB, 2);
    ASSERT_NE(d.actions.grant_of(a), nullptr);
    if (bound == 0) {
      EXPECT_EQ(d.actions.grant_of(a)->buffers.size(), 4u);
      EXPECT_FALSE(d.actions.was_granted(b, 0)) << "no bound: b waits for a's phase";
      continue;
    }
    EXPECT_EQ(d.actions.grant_of(a)->buffers.size(), 2u);
    ASSERT_TRUE(d.actions.was_granted(b, 0)) << "b's phase starts beside a's";
    for (BufferId k : d.actions.grant_of(b)->buffers) {
      const auto& mine = d.actions.grant_of(a)->buffers;
      EXPECT_EQ(std::count(mine.begin(), mine.end(), k), 0) << "b's buffers are not a's";
    }
  }
}

TEST(PhaseBound, HoldsForThePoliciesThatRunPhasesApart) {
  for (const auto* name :
       {"max-bandwidth", "min-stall", "max-buffer-efficiency", "fairness", "priority"}) {
    for (const int bound : {0, 2}) {
      SchedulerConfig c = config(4, 100 * GB);
      c.max_phase_buffers = bound;
      Driver d(name, c);
      const AppId a = d.reg(app("a"), 0);
      d.request(a, 0, 40 * GB, 1);
      ASSERT_TRUE(d.actions.was_granted(a, 0)) << name;
      const size_t placed = d.actions.grant_of(a)->buffers.size();
      if (bound == 0)
        EXPECT_GT(placed, 2u) << name << ": a large phase alone spreads over the buffers";
      else
        EXPECT_EQ(placed, 2u) << name;
    }
  }
  SchedulerConfig c = config(4, 100 * GB);
  c.min_buffers = 3;
  c.max_phase_buffers = 2;
  RecordingActions actions;
  EXPECT_THROW(make_scheduler("max-bandwidth", c, actions), std::invalid_argument);
}
