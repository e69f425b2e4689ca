// Decisions that pin each policy to what the Harmonia paper (harmonia-cluster2018.txt, section
// IV-B, Fig. 5's example) says it does. Each policy has one test that fails when its cost function
// (or, for the rule-based policies, the key it ranks by) is replaced by a constant, and one that
// fails when its queue order is reversed; `make mutate` (scripts/mutate.py) applies both mutations
// to every policy and checks that these tests catch them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/registry.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig colocating_ssd_buffers(int count, double capacity, uint64_t seed = 1) {
  SchedulerConfig c = ssd_buffers(count, capacity);
  c.max_colocated = 3;
  c.seed = seed;
  return c;
}

AppInfo job(const std::string& name, int priority = 0, double declared = 20 * GB) {
  return {.name = name, .nodes = 4, .priority = priority, .declared_bytes = declared};
}

/// Drives a scheduler as a host does: the events of one instant, then one decision.
struct Host : PolicyDriver {
  using PolicyDriver::PolicyDriver;

  std::vector<AppId> register_apps(int n, int priority = 0, double declared = 20 * GB) {
    std::vector<AppId> ids;
    for (int i = 0; i < n; ++i)
      ids.push_back(
          scheduler->on_app_register(job("app" + std::to_string(i), priority, declared), 0));
    scheduler->on_tick(0);
    return ids;
  }
  /// Ends the application and reports all its data drained from every buffer.
  void end_and_stage_out(AppId app, double now) {
    end(app, now);
    for (BufferId b = 0; b < static_cast<BufferId>(buffers().size()); ++b) {
      const double held = buffers()[static_cast<size_t>(b)].drainable();
      if (held > 0) scheduler->on_drained(b, held, now);
    }
    scheduler->on_tick(now);
  }
  int phases_on(BufferId b) const { return buffers()[static_cast<size_t>(b)].phases; }
};

/// The order in which a random-order policy considers simultaneous phases: one key per phase,
/// drawn from the scenario seed in request order, lowest first (docs/scheduling-model.md, 5).
std::vector<AppId> seeded_order(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<double, AppId>> keys;
  for (AppId a = 0; a < n; ++a)
    keys.emplace_back(std::uniform_real_distribution<double>(0, 1)(rng), a);
  std::sort(keys.begin(), keys.end());
  std::vector<AppId> order;
  for (const auto& [key, app] : keys) order.push_back(app);
  return order;
}

}  // namespace

// ---- DataWarp (IV-B, line 141 of the paper's text) ----

TEST(DataWarpDecisions, AdmitsOnlyTheJobsWhoseReservationsFit) {
  // "Each application asks for a reservation of predefined buffer capacity ... Otherwise, the
  // application will remain in the batch scheduler's queue". Fig. 5: 6 applications of two 10 GB
  // phases, 2 buffers that hold 4 phases: DataWarp picks apps 1 and 2, the rest wait.
  Host run("datawarp", colocating_ssd_buffers(2, 20 * GB));
  run.register_apps(6);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1}));
  // A job declaring the whole capacity waits behind them, and blocks the line.
  Host big("datawarp", colocating_ssd_buffers(2, 20 * GB));
  big.scheduler->on_app_register(job("small", 0, 10 * GB), 0);
  big.scheduler->on_app_register(job("whole", 0, 40 * GB), 0);
  big.scheduler->on_app_register(job("tiny", 0, 1 * GB), 0);
  big.scheduler->on_tick(0);
  EXPECT_EQ(big.actions.admitted, (std::vector<AppId>{0}));
}

TEST(DataWarpDecisions, QueuedJobsStartFirstComeFirstServed) {
  // "DataWarp will pick apps 1 and 2 based on FCFS order ... Upon completion of the first two
  // apps, DataWarp will flush ... and proceed with the next two apps. This process will be
  // repeated for the last two remaining apps."
  Host run("datawarp", colocating_ssd_buffers(2, 20 * GB));
  run.register_apps(6);
  for (AppId done : {0, 1}) {
    run.request_together({done}, 10 * GB, 1);
    run.complete(done, 0, 2);
    run.end_and_stage_out(done, 3);
  }
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1, 2, 3}));
  for (AppId done : {2, 3}) run.end_and_stage_out(done, 4);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1, 2, 3, 4, 5}));
}

// ---- Maximum buffer system efficiency (IV-B1, Eq. 4) ----

TEST(MaxBufferEfficiencyDecisions, OnePhaseOnBothBuffersTheOthersWait) {
  // "Harmonia, under this policy will schedule app 1 at t=0 and will run on top of both buffers
  // hence maximum I/O bandwidth. App 2 will start at t=2, effectively overlapping its computation
  // phases with the I/O phase of app 1": one phase at a time, on every buffer. (Admission limit
  // off, so that six phases compete and only the cost decides.)
  auto cfg = colocating_ssd_buffers(2, 40 * GB);
  cfg.max_running_apps = 0;
  Host run("max-buffer-efficiency", cfg);
  const auto apps = run.register_apps(6);
  run.request_together(apps, 10 * GB, 0);
  ASSERT_EQ(run.actions.grants.size(), 1u);
  EXPECT_EQ(run.actions.grants[0].app, 0) << "first come, first served";
  EXPECT_EQ(run.actions.grants[0].buffers, (std::vector<BufferId>{0, 1}));
  // A phase requested while app 1 writes waits rather than share the busy buffers.
  run.complete(0, 0, 20);
  run.request_together({0}, 10 * GB, 21, 1);
  EXPECT_EQ(run.actions.grants.size(), 2u);
  EXPECT_EQ(run.phases_on(0), 1);
}

TEST(MaxBufferEfficiencyDecisions, AnIdleBufferTakesAWaitingPhaseAtOnce) {
  // Eq. 4 rewards a decision that raises buffer utilization: "Harmonia considers if scheduling
  // the i-th I/O phase on the j-th buffer will increase the buffer utilization". A phase that
  // waits while the only free buffer is busy starts as soon as another buffer comes back from
  // flushing, although a phase still runs elsewhere.
  auto cfg = colocating_ssd_buffers(2, 100 * GB);
  cfg.flush_threshold = 0.25;
  cfg.backup_flushers = 1;
  Host run("max-buffer-efficiency", cfg);
  run.register_apps(2);
  run.request_together({0}, 60 * GB, 0);  // 30 GB on each buffer
  run.complete(0, 0, 10);  // both over 25 %: one becomes the (exclusive) backup flusher
  BufferId flusher = 0;
  while (!run.scheduler->buffers()[static_cast<size_t>(flusher)].exclusive_flush) ++flusher;
  run.request_together({0}, 10 * GB, 20, 1);
  ASSERT_EQ(run.actions.grants.size(), 2u);
  EXPECT_EQ(run.actions.grants[1].buffers, std::vector<BufferId>{1 - flusher});
  run.request_together({1}, 10 * GB, 21);
  EXPECT_EQ(run.actions.grants.size(), 2u) << "waits rather than share the busy buffer";
  run.scheduler->on_drained(flusher, 30 * GB, 22);
  run.scheduler->on_tick(22);
  ASSERT_EQ(run.actions.grants.size(), 3u) << "the flushed buffer is idle: it takes the phase";
  EXPECT_EQ(run.actions.grants[2].app, 1);
  EXPECT_EQ(run.actions.grants[2].buffers, std::vector<BufferId>{flusher});
}

TEST(MaxBufferEfficiencyDecisions, WaitingPhasesGoInRequestOrder) {
  // The policy takes candidates first come first served (docs/scheduling-model.md, 5): when the
  // buffers free up, the phase that asked first gets them (admission limit off: three apps).
  auto cfg = colocating_ssd_buffers(2, 100 * GB);
  cfg.max_running_apps = 0;
  Host run("max-buffer-efficiency", cfg);
  run.register_apps(3);
  run.request_together({0}, 10 * GB, 0);
  run.request_together({2}, 10 * GB, 1);  // the higher application id asks first
  run.request_together({1}, 10 * GB, 2);
  ASSERT_EQ(run.actions.grants.size(), 1u);
  run.complete(0, 0, 10);
  ASSERT_EQ(run.actions.grants.size(), 2u);
  EXPECT_EQ(run.actions.grants[1].app, 2);
  run.complete(2, 0, 20);
  ASSERT_EQ(run.actions.grants.size(), 3u);
  EXPECT_EQ(run.actions.grants[2].app, 1);
}

// ---- Application priority (IV-B2) ----

TEST(PriorityDecisions, FollowsThePaperPriorityPairs) {
  // "app1-p5, app2-p4, app3&4-p3, app5-p2, and app6-p1. This dictates exactly how each I/O phase
  // should be scheduled ... for app 3 and 4 that have the same priority 3, Harmonia schedules
  // them ... by sharing the two available buffers". The phases ask in the reverse order, so
  // first come first served would give the opposite.
  const int priority[] = {5, 4, 3, 3, 2, 1};
  Host run("priority", colocating_ssd_buffers(2, 100 * GB));
  run.scheduler->on_app_register(job("blocker", 9), 0);
  for (int p : priority) run.scheduler->on_app_register(job("p" + std::to_string(p), p), 0);
  run.scheduler->on_tick(0);
  run.request_together({0}, 10 * GB, 0, 0, 9);
  for (AppId a = 6; a >= 1; --a) run.request_together({a}, 10 * GB, 7 - a, 0, priority[a - 1]);
  run.complete(0, 0, 10);
  ASSERT_EQ(run.actions.granted_apps(), (std::vector<AppId>{0, 1}));
  EXPECT_EQ(run.actions.grants[1].buffers.size(), 2u) << "exclusively, on both buffers";
  run.complete(1, 0, 20);
  EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{0, 1, 2}));
  run.complete(2, 0, 30);
  ASSERT_EQ(run.actions.grants.size(), 5u);
  EXPECT_EQ(run.actions.grants[3].buffers.size(), 1u) << "equal priorities share the buffers";
  EXPECT_EQ(run.actions.grants[4].buffers.size(), 1u);
  EXPECT_EQ(run.actions.grants[3].app + run.actions.grants[4].app, 3 + 4);
  run.complete(3, 0, 40);
  run.complete(4, 0, 40);
  run.complete(5, 0, 50);
  ASSERT_EQ(run.actions.grants.size(), 7u);
  EXPECT_EQ(run.actions.grants[5].app, 5);
  EXPECT_EQ(run.actions.grants[6].app, 6);
}

TEST(PriorityDecisions, EqualPrioritiesInFcfsModeGoInRequestOrder) {
  // "For I/O phases with same priority, Harmonia offers two modes: ... or execute them in
  // first-come-first-serve (FCFS) fashion."
  auto cfg = colocating_ssd_buffers(2, 100 * GB);
  cfg.priority_tie = PriorityTie::Fcfs;
  Host run("priority", cfg);
  run.register_apps(4, 1);
  run.request_together({0}, 10 * GB, 0, 0, 1);
  run.request_together({3}, 10 * GB, 1, 0, 1);  // the highest application id asks first
  run.request_together({1}, 10 * GB, 2, 0, 1);
  run.request_together({2}, 10 * GB, 3, 0, 1);
  for (AppId a : {0, 3, 1}) run.complete(a, 0, 10 + a);
  EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{0, 3, 1, 2}));
}

// ---- Maximum application bandwidth (IV-B3, Eq. 5) ----

TEST(MaxBandwidthDecisions, ShorterPhaseFirstWhateverTheRandomOrder) {
  // Eq. 5 averages IOSize / CompletionTime over the phases: "This policy might schedule an I/O
  // phase later if that ensures maximum buffer bandwidth." A 2 GB and a 20 GB phase at once on
  // exclusive buffers: serving the small one first costs the big one 10 % of its bandwidth,
  // the other way round costs the small one 91 %. So the small one goes first, on both buffers,
  // for every seed, although the order of candidates is random.
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Host run("max-bandwidth", colocating_ssd_buffers(2, 100 * GB, seed));
    run.register_apps(2);
    run.scheduler->on_phase_request({0, 0, 20 * GB, Op::Write, 0}, 0);
    run.scheduler->on_phase_request({1, 0, 2 * GB, Op::Write, 0}, 0);
    run.scheduler->on_tick(0);
    ASSERT_EQ(run.actions.grants.size(), 1u) << "seed " << seed;
    EXPECT_EQ(run.actions.grants[0].app, 1) << "seed " << seed;
    EXPECT_EQ(run.actions.grants[0].buffers, (std::vector<BufferId>{0, 1})) << "seed " << seed;
  }
}

TEST(MaxBandwidthDecisions, EqualPhasesGoInTheSeededRandomOrder) {
  // "The selection of which application goes first is performed randomly": one phase at a time
  // on both buffers, the first being the one with the lowest seeded key; over seeds each
  // application goes first about as often.
  std::map<AppId, int> first;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Host run("max-bandwidth", colocating_ssd_buffers(2, 100 * GB, seed));
    run.register_apps(2);
    run.request_together({0, 1}, 10 * GB, 0);
    ASSERT_EQ(run.actions.grants.size(), 1u);
    EXPECT_EQ(run.actions.grants[0].app, seeded_order(seed, 2)[0]) << "seed " << seed;
    ++first[run.actions.grants[0].app];
  }
  EXPECT_GE(first[0], 10);
  EXPECT_GE(first[1], 10);
}

// ---- Application fairness (IV-B4, Eq. 6) ----

TEST(FairnessDecisions, DividesTheBuffersEquallyAmongApplications) {
  // "Resources are divided equally into all applications." Four applications, two buffers,
  // X = 3: two phases per buffer, not three on one and one alone on the other (the alone one
  // would finish far ahead of the three), and nobody waits.
  Host run("fairness", colocating_ssd_buffers(2, 100 * GB));
  const auto apps = run.register_apps(4);
  run.request_together(apps, 10 * GB, 0);
  ASSERT_EQ(run.actions.grants.size(), 4u);
  EXPECT_EQ(run.phases_on(0), 2);
  EXPECT_EQ(run.phases_on(1), 2);
}

TEST(FairnessDecisions, WhoWaitsWhenNotAllFitIsTheSeededRandomChoice) {
  // "If the total number of I/O phases to be scheduled cannot fit into the available buffers,
  // Harmonia randomly selects which ones to schedule at this point in time and which ones later.
  // The randomness ensures that no application will be favored over time." Seven applications,
  // room for six: the one left out is the last in the seeded order, and not always the same.
  std::map<AppId, int> left_out;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Host run("fairness", colocating_ssd_buffers(2, 100 * GB, seed));
    const auto apps = run.register_apps(7);
    run.request_together(apps, 10 * GB, 0);
    ASSERT_EQ(run.actions.grants.size(), 6u);
    const auto granted = run.actions.granted_apps();
    AppId waiting = -1;
    for (AppId a : apps)
      if (std::find(granted.begin(), granted.end(), a) == granted.end()) waiting = a;
    EXPECT_EQ(waiting, seeded_order(seed, 7).back()) << "seed " << seed;
    ++left_out[waiting];
  }
  EXPECT_GE(left_out.size(), 4u) << "the waiting application changes with the seed";
}

// ---- Minimum application stall time (IV-B5, Eq. 7) ----

TEST(MinStallDecisions, ApplicationsOnSeparateBuffersThenOverlapping) {
  // "Harmonia will schedule app 1 on the first buffer ..., app 2 on the other buffer ..., and app
  // 3 on the first buffer overlapping computation and I/O with app 1": two phases asking
  // together get a buffer each (no wait, no interference); a third one asking while they write
  // waits for app 1's buffer (its I/O overlaps app 1's next computation) rather than slow
  // app 1 down.
  Host run("min-stall", colocating_ssd_buffers(2, 100 * GB));
  run.register_apps(3);
  run.request_together({0, 1}, 10 * GB, 0);
  ASSERT_EQ(run.actions.grants.size(), 2u);
  EXPECT_EQ(run.actions.grants[0].buffers.size(), 1u);
  EXPECT_EQ(run.actions.grants[1].buffers.size(), 1u);
  EXPECT_NE(run.actions.grants[0].buffers, run.actions.grants[1].buffers);
  run.request_together({2}, 10 * GB, 1);
  EXPECT_EQ(run.actions.grants.size(), 2u);
  const AppId first = run.actions.grants[0].app;
  run.complete(first, 0, 21);
  ASSERT_EQ(run.actions.grants.size(), 3u);
  EXPECT_EQ(run.actions.grants[2].app, 2);
  EXPECT_EQ(run.actions.grants[2].buffers, run.actions.grants[0].buffers);
}

TEST(MinStallDecisions, WhoGetsTheIdleBufferIsTheSeededRandomChoice) {
  // "The selection of which app starts first is random ensuring that in a period of time all
  // apps will experience similar stall time." One idle buffer, two phases asking together: the
  // first in the seeded order takes it.
  std::map<AppId, int> first;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    auto cfg = colocating_ssd_buffers(1, 100 * GB, seed);
    cfg.max_colocated = 1;
    Host run("min-stall", cfg);
    run.register_apps(2);
    run.request_together({0, 1}, 10 * GB, 0);
    ASSERT_EQ(run.actions.grants.size(), 1u);
    EXPECT_EQ(run.actions.grants[0].app, seeded_order(seed, 2)[0]) << "seed " << seed;
    ++first[run.actions.grants[0].app];
  }
  EXPECT_GE(first[0], 8);
  EXPECT_GE(first[1], 8);
}

// ---- Admission limits (the number of applications a policy runs at once) ----

TEST(AdmissionLimits, MaxBufferEfficiencyRunsTwoAndAdmitsTheNextWhenOneFinishes) {
  // IV-B1: app 1, then app 2 overlapping its computation with app 1's I/O; "The rest of the
  // apps will be scheduled once one of the previous apps finishes."
  Host run("max-buffer-efficiency", colocating_ssd_buffers(2, 100 * GB));
  run.register_apps(6);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1}));
  run.request_together({0}, 10 * GB, 1);
  run.complete(0, 0, 10);
  EXPECT_EQ(run.actions.admitted.size(), 2u) << "a finished phase is not a finished app";
  run.scheduler->on_app_end(1, 11);
  run.scheduler->on_tick(11);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1, 2}));
  run.scheduler->on_app_end(0, 12);
  run.scheduler->on_tick(12);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1, 2, 3}));
}

TEST(AdmissionLimits, MaxBandwidthRunsUpToTwoApplications) {
  // IV-B3: "To be able to offer maximum bandwidth, we can see that up to 2 concurrent
  // applications are scheduled."
  Host run("max-bandwidth", colocating_ssd_buffers(2, 100 * GB));
  run.register_apps(6);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1}));
  run.scheduler->on_app_end(0, 5);
  run.scheduler->on_tick(5);
  EXPECT_EQ(run.actions.admitted, (std::vector<AppId>{0, 1, 2}));
}

TEST(AdmissionLimits, FairnessAndMinStallStartEveryone) {
  // IV-B4: "Harmonia can indeed start all 6 applications at the same time"; IV-B5 states no
  // limit either.
  for (const char* policy : {"fairness", "min-stall"}) {
    Host run(policy, colocating_ssd_buffers(2, 100 * GB));
    run.register_apps(6);
    EXPECT_EQ(run.actions.admitted.size(), 6u) << policy;
  }
}

TEST(AdmissionLimits, TheConfigurationOverridesThePolicyDefault) {
  auto off = colocating_ssd_buffers(2, 100 * GB);
  off.max_running_apps = 0;
  Host unlimited("max-bandwidth", off);
  unlimited.register_apps(6);
  EXPECT_EQ(unlimited.actions.admitted.size(), 6u) << "0: no limit";
  auto three = colocating_ssd_buffers(2, 100 * GB);
  three.max_running_apps = 3;
  Host limited("min-stall", three);
  limited.register_apps(6);
  EXPECT_EQ(limited.actions.admitted, (std::vector<AppId>{0, 1, 2}));
  limited.scheduler->on_app_end(1, 1);
  EXPECT_EQ(limited.actions.admitted, (std::vector<AppId>{0, 1, 2, 3})) << "first come first";
  auto bad = colocating_ssd_buffers(2, 100 * GB);
  bad.max_running_apps = -1;
  RecordingActions actions;
  EXPECT_THROW(make_scheduler("fairness", bad, actions), std::invalid_argument);
}
