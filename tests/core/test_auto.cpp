// The `auto` policy and its fluid look-ahead (docs/scheduling-model.md section 10): the forecast
// follows the device curve exactly on cases solved by hand, and auto lets the candidate with the
// best forecast decide, so that the same state gives different decisions for different
// objectives (a fixed policy in its place fails one of the two cases).
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/lookahead.hpp"
#include "core/policies/auto.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

// Two applications each write `kBytes` at t = 1 to the same single SSD buffer. Sharing it
// (fair-share) ends both at 2B / aggregate(2); one after the other (max-bandwidth, X = 1) ends
// the first at B / bw(1) and the second at 2B / bw(1). The SSD's aggregate grows only 2.3 % from
// one stream to two, so sharing wins the makespan and loses the mean completion, the stall and
// the slowdown.
constexpr double kBytes = 10 * GB;

SchedulerConfig one_buffer(const std::string& objective) {
  SchedulerConfig c = ssd_buffers(1, 1000 * GB);
  c.max_colocated = 4;
  c.auto_objective = objective;
  c.auto_candidates = {"fair-share", "max-bandwidth"};
  return c;
}

AppInfo app(const std::string& name) {
  AppInfo info;
  info.name = name;
  return info;
}

std::unique_ptr<PolicyDriver> two_writers(const std::string& policy, SchedulerConfig cfg) {
  auto d = std::make_unique<PolicyDriver>(policy, std::move(cfg));
  d->reg(app("a"), 0);
  d->reg(app("b"), 0);
  return d;
}

const AutoPolicy& auto_of(const PolicyDriver& d) {
  return dynamic_cast<const AutoPolicy&>(*d.scheduler);
}

}  // namespace

TEST(Lookahead, ForecastFollowsTheDeviceCurve) {
  const auto cfg = one_buffer("makespan");
  const double bw1 = cfg.buffer_device.stream_bw(1, Op::Write);
  const double agg2 = cfg.buffer_device.aggregate_bw(2, Op::Write);
  ASSERT_GT(agg2, bw1);

  // The state forecast from: both phases pending at t = 1, nothing decided yet.
  RecordingActions idle;
  auto state = make_scheduler("fair-share", cfg, idle);
  state->on_app_register(app("a"), 0);
  state->on_app_register(app("b"), 0);
  state->on_phase_request({0, 0, kBytes, Op::Write, 0}, 1);
  state->on_phase_request({1, 0, kBytes, Op::Write, 0}, 1);

  const Forecast shared = Lookahead::forecast("fair-share", *state, 1, {});
  ASSERT_TRUE(shared.complete);
  EXPECT_EQ(shared.phases, 2);
  EXPECT_NEAR(shared.makespan, 2 * kBytes / agg2, 1e-6);
  EXPECT_NEAR(shared.mean_completion, 2 * kBytes / agg2, 1e-6);
  EXPECT_NEAR(shared.stall, 2 * kBytes / agg2 - kBytes / bw1, 1e-6);
  EXPECT_NEAR(shared.slowdown, (2 * kBytes / agg2) / (kBytes / bw1), 1e-9);

  const Forecast serial = Lookahead::forecast("max-bandwidth", *state, 1, {});
  ASSERT_TRUE(serial.complete);
  EXPECT_NEAR(serial.makespan, 2 * kBytes / bw1, 1e-6);
  EXPECT_NEAR(serial.mean_completion, 1.5 * kBytes / bw1, 1e-6);
  EXPECT_NEAR(serial.stall, 0.5 * kBytes / bw1, 1e-6) << "the second waits one phase";
  EXPECT_NEAR(serial.slowdown, 1.5, 1e-9);

  EXPECT_LT(shared.value(AutoObjective::Makespan), serial.value(AutoObjective::Makespan));
  EXPECT_GT(shared.value(AutoObjective::MeanCompletion),
            serial.value(AutoObjective::MeanCompletion));
  // The forecast decides on a copy: the state it started from is untouched.
  EXPECT_TRUE(idle.grants.empty());
  EXPECT_EQ(state->buffers()[0].phases, 0);
}

TEST(Lookahead, ExpectedIterationJoinsTheForecast) {
  const auto cfg = one_buffer("makespan");
  const double bw1 = cfg.buffer_device.stream_bw(1, Op::Write);
  RecordingActions idle;
  auto state = make_scheduler("max-bandwidth", cfg, idle);
  state->on_app_register(app("a"), 0);
  state->on_phase_request({0, 0, kBytes, Op::Write, 0}, 1);
  // After its phase, the application computes 100 s and writes the same again.
  const ExpectedIteration next{0, 1, kBytes, Op::Write, 100, -1};
  const Forecast f = Lookahead::forecast("max-bandwidth", *state, 1, {next});
  ASSERT_TRUE(f.complete);
  EXPECT_EQ(f.phases, 2);
  EXPECT_NEAR(f.makespan, 2 * kBytes / bw1 + 100, 1e-6);
}

TEST(Lookahead, ForecastLeavesOutWhatHasEndedAndDrained) {
  // Two schedulers in the same state now, one of them after 30 applications that came, wrote
  // and left: the forecast runs on the applications it can touch only, so both forecast the
  // same, and the ids it reports are those of the scheduler it forecasts from.
  const auto cfg = one_buffer("makespan");
  RecordingActions idle, busy;
  auto fresh = make_scheduler("max-bandwidth", cfg, idle);
  auto aged = make_scheduler("max-bandwidth", cfg, busy);
  for (int k = 0; k < 30; ++k) {
    const double t = 10.0 * k;
    const AppId id = aged->on_app_register(app("old" + std::to_string(k)), t);
    aged->on_phase_request({id, 0, GB, Op::Write, 0}, t);
    aged->on_tick(t);
    aged->on_phase_complete(id, 0, t + 1);
    aged->on_app_end(id, t + 1);
    aged->on_drained(0, GB, t + 2);
    aged->on_tick(t + 2);
  }
  ASSERT_EQ(aged->buffers()[0].used, 0);
  for (auto* s : {fresh.get(), aged.get()}) {
    const AppId a = s->on_app_register(app("a"), 400);
    const AppId b = s->on_app_register(app("b"), 400);
    s->on_phase_request({a, 0, kBytes, Op::Write, 0}, 401);
    s->on_phase_request({b, 0, kBytes, Op::Write, 0}, 401);
  }
  const ExpectedIteration next_fresh{1, 1, kBytes, Op::Write, 50, -1};
  const ExpectedIteration next_aged{31, 1, kBytes, Op::Write, 50, -1};
  const Forecast f = Lookahead::forecast("max-bandwidth", *fresh, 401, {next_fresh});
  const Forecast g = Lookahead::forecast("max-bandwidth", *aged, 401, {next_aged});
  ASSERT_TRUE(f.complete);
  ASSERT_TRUE(g.complete);
  EXPECT_EQ(f.phases, 3);
  EXPECT_EQ(g.phases, f.phases);
  EXPECT_DOUBLE_EQ(g.makespan, f.makespan);
  EXPECT_DOUBLE_EQ(g.stall, f.stall);
  ASSERT_EQ(g.followed.size(), f.followed.size());
  for (size_t k = 0; k < f.followed.size(); ++k) {
    EXPECT_EQ(g.followed[k].app, f.followed[k].app + 30) << "ids of the scheduler forecast from";
    EXPECT_EQ(g.followed[k].index, f.followed[k].index);
    EXPECT_DOUBLE_EQ(g.followed[k].end, f.followed[k].end);
  }
}

TEST(Lookahead, ForecastLateInAYearTakesTheSameEvents) {
  // The same phases forecast from the start of a run and from day 231, where a double holds a
  // time only to 4 ns: each forecast takes the same few events there as at the start, and ends.
  // (A phase left a few ns from its end would never end if two events 1 ns apart only were one
  // instant, and the forecast would spin to its event limit.)
  const auto cfg = one_buffer("makespan");
  for (int k = 0; k < 40; ++k) {
    const double first = (1 + 0.37 * k) * GB, second = (3 + 0.71 * k) * GB;
    std::vector<Forecast> forecasts;
    for (const double start : {1.0, 2e7 + 0.1 * k}) {
      RecordingActions idle;
      auto state = make_scheduler("fair-share", cfg, idle);
      state->on_app_register(app("a"), 0);
      state->on_app_register(app("b"), 0);
      state->on_phase_request({0, 0, first, Op::Write, 0}, start);
      state->on_phase_request({1, 0, second, Op::Write, 0}, start);
      const ExpectedIteration next{0, 1, first, Op::Write, 10, -1};
      forecasts.push_back(Lookahead::forecast("fair-share", *state, start, {next}));
    }
    const auto& early = forecasts[0];
    const auto& late = forecasts[1];
    ASSERT_TRUE(early.complete) << k;
    ASSERT_TRUE(late.complete) << k << ": " << late.events << " events";
    EXPECT_EQ(late.phases, 3);
    EXPECT_EQ(late.events, early.events) << k;
    EXPECT_NEAR(late.makespan, early.makespan, 1e-6) << k;
  }
}

TEST(Lookahead, ForecastCostDoesNotGrowWithTheQueue) {
  // Two jobs hold a 4-node machine and write; 10 or 1,000 jobs wait for nodes. No job ends in a
  // forecast, so none is admitted: the forecast runs on the two running jobs only and takes the
  // same events whatever the length of the queue.
  std::vector<Forecast> forecasts;
  for (const int queued : {10, 1000}) {
    RecordingActions idle;
    auto state = make_scheduler("fair-share", shared_machine(4), idle);
    state->on_app_register(batch_job("a", 2, 3600), 0);
    state->on_app_register(batch_job("b", 2, 3600), 0);
    for (int k = 0; k < queued; ++k)
      state->on_app_register(batch_job("q" + std::to_string(k), 1, 600), 1);
    ASSERT_EQ(state->free_nodes(), 0);
    state->on_phase_request({0, 0, kBytes, Op::Write, 0}, 2);
    state->on_phase_request({1, 0, 2 * kBytes, Op::Write, 0}, 2);
    const std::vector<ExpectedIteration> next{{0, 1, kBytes, Op::Write, 30, -1}};

    RecordingActions unused;
    auto copy = make_scheduler("fair-share", shared_machine(4), unused);
    EXPECT_EQ(Lookahead::copy_live_state(*state, *copy, next), (std::vector<AppId>{0, 1}))
        << queued << " waiting";
    forecasts.push_back(Lookahead::forecast("fair-share", *state, 2, next));
    ASSERT_TRUE(forecasts.back().complete) << queued << " waiting";
  }
  EXPECT_EQ(forecasts[0].phases, 3);
  EXPECT_EQ(forecasts[1].events, forecasts[0].events);
  EXPECT_DOUBLE_EQ(forecasts[1].stall, forecasts[0].stall);
}

TEST(Recorder, LivePartRenumbersTheNamedApplications) {
  Recorder r(2, 10 * GB);
  for (int a = 0; a < 4; ++a) r.app_arrived(a, "app" + std::to_string(a), a);
  r.phase_requested(0, 0, GB, 1);
  r.phase_requested(2, 0, 2 * GB, 2);
  r.phase_requested(3, 0, 3 * GB, 3);
  r.phase_requested(2, 1, 4 * GB, 4);
  r.phase_granted(2, 1, {1}, 0.5, 5);
  r.buffer_changed(1, true, 4 * GB, 5);
  r.drain_started(0, 6);
  const Recorder part = r.live_part({2, 3});
  ASSERT_EQ(part.phases().size(), 3u);
  EXPECT_EQ(part.phases()[0].app, 0) << "application 2 is the first named";
  EXPECT_EQ(part.phases()[0].bytes, 2 * GB);
  EXPECT_EQ(part.phases()[1].app, 1);
  EXPECT_EQ(part.phases()[2].index, 1);
  EXPECT_EQ(part.phases()[2].granted, 5);
  EXPECT_EQ(part.phases_of(0), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(part.drains().size(), 1u) << "the drain that runs";
  EXPECT_TRUE(part.phases_of(2).empty());
}

TEST(Auto, PicksSharingForTheMakespan) {
  auto d = two_writers("auto", one_buffer("makespan"));
  d->request_together({0, 1}, kBytes, 1);
  EXPECT_EQ(auto_of(*d).last_choice(), "fair-share");
  ASSERT_EQ(d->actions.grants.size(), 2u) << "both phases share the buffer";
  EXPECT_EQ(d->buffers()[0].phases, 2);
}

TEST(Auto, PicksOneAtATimeForMeanCompletionStallAndSlowdown) {
  for (const std::string objective : {"mean_completion", "stall", "slowdown"}) {
    auto d = two_writers("auto", one_buffer(objective));
    d->request_together({0, 1}, kBytes, 1);
    EXPECT_EQ(auto_of(*d).last_choice(), "max-bandwidth") << objective;
    ASSERT_EQ(d->actions.grants.size(), 1u) << objective << ": the other phase waits";
    d->complete(d->actions.grants[0].app, 0, 1 + kBytes / 477e6);
    EXPECT_EQ(d->actions.grants.size(), 2u) << objective << ": then it runs";
  }
}

TEST(Auto, ChoiceDoesNotDependOnTheCandidatesOrder) {
  for (const std::string objective : {"makespan", "mean_completion"}) {
    auto cfg = one_buffer(objective);
    cfg.auto_candidates = {"max-bandwidth", "fair-share"};
    auto d = two_writers("auto", cfg);
    d->request_together({0, 1}, kBytes, 1);
    EXPECT_EQ(auto_of(*d).last_choice(), objective == "makespan" ? "fair-share" : "max-bandwidth");
  }
}

TEST(Auto, DecidesLikeTheChosenPolicy) {
  // What auto grants is what the chosen policy grants from the same state.
  auto fixed = two_writers("fair-share", one_buffer("makespan"));
  fixed->request_together({0, 1}, kBytes, 1);
  auto chosen = two_writers("auto", one_buffer("makespan"));
  chosen->request_together({0, 1}, kBytes, 1);
  ASSERT_EQ(fixed->actions.grants.size(), chosen->actions.grants.size());
  for (size_t k = 0; k < fixed->actions.grants.size(); ++k) {
    EXPECT_EQ(fixed->actions.grants[k].app, chosen->actions.grants[k].app);
    EXPECT_EQ(fixed->actions.grants[k].buffers, chosen->actions.grants[k].buffers);
  }
}

TEST(Auto, ExpectsTheNextWriteAfterAnAnnouncedRead) {
  // Application a has written twice, 10 s apart, and announces that it will read next (index
  // 2) while b's long phase holds the buffer. The forecast must expect a's next write after the
  // read (index 3): a second phase of index 2 beside the read's stage-in would have `fairness`
  // grant one of the two twice.
  auto cfg = one_buffer("stall");
  cfg.auto_candidates = {"fairness", "max-bandwidth"};
  auto d = std::make_unique<PolicyDriver>("auto", cfg);
  d->reg(app("a"), 0);
  d->reg(app("b"), 0);
  d->request(0, 0, GB, 1);
  d->complete(0, 0, 4);
  d->request(0, 1, GB, 14);
  d->complete(0, 1, 17);
  d->request(1, 0, 100 * GB, 18);
  EXPECT_NO_THROW(d->announce_read(0, 2, GB, 18));
  EXPECT_FALSE(auto_of(*d).last_choice().empty()) << "auto decided";
}

TEST(Auto, DefaultCandidatesAreEveryPerWindowPolicy) {
  RecordingActions actions;
  const AutoPolicy policy(ssd_buffers(2, 100 * GB), actions);
  const auto& names = policy.candidates();
  for (const auto& name : policy_names())
    EXPECT_EQ(std::find(names.begin(), names.end(), name) != names.end(),
              name != "auto" && name != "datawarp" && name != "slurm-easy" &&
                  name != "slurm-easy-sjf" && name != "plan-based")
        << name;
}

TEST(Auto, RejectsUnknownObjectiveAndUnchoosableCandidates) {
  RecordingActions actions;
  auto with = [](const std::string& objective, std::vector<std::string> candidates) {
    SchedulerConfig c = ssd_buffers(2, 100 * GB);
    c.auto_objective = objective;
    c.auto_candidates = std::move(candidates);
    return c;
  };
  try {
    AutoPolicy bad(with("fastest", {}), actions);
    FAIL() << "unknown objective accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("auto.objective"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AutoPolicy(with("stall", {"datawarp"}), actions), std::invalid_argument);
  EXPECT_THROW(AutoPolicy(with("stall", {"auto"}), actions), std::invalid_argument);
  EXPECT_THROW(AutoPolicy(with("stall", {"no-such-policy"}), actions), std::invalid_argument);
  EXPECT_THROW(AutoPolicy(with("stall", {"priority", "priority"}), actions), std::invalid_argument);
  EXPECT_EQ(parse_auto_objective("slowdown"), AutoObjective::Slowdown);
}
