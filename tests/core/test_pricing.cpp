// Discounted scheduling (docs/scheduling-model.md, section 9): the price of each I/O service
// class, the refund when the scheduler breaks a class's bound, and the classes' effect on the
// order in which the policies grant phases.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/accounting.hpp"
#include "core/optimizer.hpp"
#include "core/pricing.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

AppInfo job(const std::string& name, double slowdown) {
  AppInfo info{.name = name, .nodes = 1, .declared_bytes = 10 * GB};
  info.io_slowdown = slowdown;
  info.io_qos = slowdown > 1 ? "relaxed" : "normal";
  return info;
}

}  // namespace

// ---- the price ----

TEST(Pricing, ChargesNodeHoursTimesRateTimesTheClassUsageFactor) {
  PricingConfig pricing;
  pricing.node_hour_rate = 2;
  const Usage usage{.nodes = 4, .elapsed = 3600, .io_taken = 100, .io_alone = 100};
  const auto normal = charge(usage, pricing.resolve("normal"), pricing);
  EXPECT_DOUBLE_EQ(normal.billed_hours, 4);
  EXPECT_DOUBLE_EQ(normal.amount, 8);
  EXPECT_DOUBLE_EQ(charge(usage, pricing.resolve("relaxed"), pricing).amount, 8 * 0.7);
  EXPECT_DOUBLE_EQ(charge(usage, pricing.resolve("scavenger"), pricing).amount, 8 * 0.5);
}

TEST(Pricing, RefundsTheIoTimeBeyondTheBoundTheClassAccepts) {
  PricingConfig pricing;
  // Relaxed accepts twice its time alone: 200 s of 100 s alone. It took 300 s: 100 s refunded.
  const Usage slow{.nodes = 2, .elapsed = 1000, .io_taken = 300, .io_alone = 100};
  const auto relaxed = charge(slow, pricing.resolve("relaxed"), pricing);
  EXPECT_TRUE(relaxed.bound_broken);
  EXPECT_DOUBLE_EQ(relaxed.slowdown, 3);
  EXPECT_DOUBLE_EQ(relaxed.refunded, 100);
  EXPECT_DOUBLE_EQ(relaxed.billed_hours, 2 * 900 / 3600.0);
  EXPECT_DOUBLE_EQ(relaxed.amount, 2 * 900 / 3600.0 * 0.7);
  // Within its bound it pays all of its elapsed time.
  const Usage kept{.nodes = 2, .elapsed = 1000, .io_taken = 200, .io_alone = 100};
  EXPECT_FALSE(charge(kept, pricing.resolve("relaxed"), pricing).bound_broken);
  EXPECT_DOUBLE_EQ(charge(kept, pricing.resolve("relaxed"), pricing).billed_hours,
                   2 * 1000 / 3600.0);
  // A normal job was promised nothing: it pays its elapsed time, as under Slurm.
  const auto normal = charge(slow, pricing.resolve("normal"), pricing);
  EXPECT_FALSE(normal.bound_broken);
  EXPECT_DOUBLE_EQ(normal.billed_hours, 2 * 1000 / 3600.0);
}

TEST(Pricing, NumericSlowdownIsPricedBetweenTheClassesAroundIt) {
  const PricingConfig pricing;
  const auto three = pricing.resolve("3");
  EXPECT_DOUBLE_EQ(three.slowdown, 3);
  EXPECT_DOUBLE_EQ(three.usage_factor, 0.6);  // halfway from relaxed (2, 0.7) to scavenger (4, 0.5)
  EXPECT_DOUBLE_EQ(pricing.resolve("1.5").usage_factor, 0.85);
  EXPECT_DOUBLE_EQ(pricing.resolve("10").usage_factor, 0.5);  // the most patient class's price
  EXPECT_DOUBLE_EQ(pricing.resolve("1").usage_factor, 1);
}

TEST(Pricing, RefusesUnknownClassesAndBadSettings) {
  PricingConfig pricing;
  for (const char* bad : {"fast", "0.5", "2x", "", "nan", "inf"}) {
    try {
      pricing.resolve(bad);
      ADD_FAILURE() << "accepted io_qos '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("io_qos '" + std::string(bad) + "'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("relaxed"), std::string::npos) << e.what();
    }
  }
  pricing.classes.push_back({"relaxed", 3, 0.6});
  EXPECT_THROW(pricing.validate(), std::invalid_argument);
  pricing.classes = {{"cheap", 0.5, 0.1}};
  EXPECT_THROW(pricing.validate(), std::invalid_argument);
  pricing.classes = {{"free", 2, -1}};
  EXPECT_THROW(pricing.validate(), std::invalid_argument);
  pricing = PricingConfig{};
  pricing.node_hour_rate = -1;
  EXPECT_THROW(pricing.validate(), std::invalid_argument);
  EXPECT_NO_THROW(PricingConfig{}.validate());
}

// ---- the schedule ----

namespace {

/// The time `bytes` take alone on one empty buffer (min_buffers = 1), as the scheduler estimates
/// it for the release bound.
double alone_on_one_buffer(const SchedulerConfig& cfg, double bytes) {
  const Candidate alone{bytes, Op::Write, 0, cfg.client_node_bw};
  return predict(alone, 1, std::vector<BufferSlot>(1), cfg.buffer_device, cfg.buffer_link_bw)
      .io_alone;
}

SchedulerConfig one_ssd(int max_colocated) {
  SchedulerConfig cfg = ssd_buffers(1, 200 * GB);
  cfg.max_colocated = max_colocated;
  return cfg;
}

}  // namespace

class DiscountedScheduling : public ::testing::TestWithParam<std::string> {};

TEST_P(DiscountedScheduling, NormalPhaseGoesBeforeARelaxedOneThatAskedFirst) {
  // One buffer, one phase at a time. The relaxed job registers and asks first, both at t=0: every
  // policy lets the normal phase go first, then the relaxed one when it ends (at 5 s, before the
  // relaxed phase's release at (2 - 1) x 22.9 / 2 = 11.4 s). Over several seeds, so that a
  // random-order policy cannot pass by luck.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SchedulerConfig cfg = one_ssd(1);
    cfg.seed = seed;
    PolicyDriver run(GetParam(), cfg);
    const AppId relaxed = run.reg(job("relaxed", 2), 0);
    const AppId normal = run.reg(job("normal", 1), 0);
    run.request_together({relaxed, normal}, 10 * GB, 0);
    ASSERT_EQ(run.actions.granted_apps(), (std::vector<AppId>{normal})) << "seed " << seed;
    ASSERT_TRUE(run.scheduler->next_release().has_value());
    EXPECT_DOUBLE_EQ(*run.scheduler->next_release(), alone_on_one_buffer(cfg, 10 * GB) / 2);
    run.complete(normal, 0, 5);
    EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{normal, relaxed}));
    EXPECT_FALSE(run.scheduler->next_release().has_value());
  }
}

TEST_P(DiscountedScheduling, EquallyPatientJobsAreScheduledAsNormalOnes) {
  // The same two requests, both relaxed: nobody yields, and the policy decides as it does for
  // two normal jobs.
  std::vector<std::vector<AppId>> granted;
  for (const double slowdown : {1.0, 2.0}) {
    PolicyDriver run(GetParam(), one_ssd(1));
    const AppId a = run.reg(job("a", slowdown), 0);
    const AppId b = run.reg(job("b", slowdown), 0);
    run.request_together({a, b}, 10 * GB, 0);
    EXPECT_FALSE(run.scheduler->next_release().has_value());
    granted.push_back(run.actions.granted_apps());
  }
  EXPECT_FALSE(granted[0].empty());
  EXPECT_EQ(granted[0], granted[1]);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, DiscountedScheduling, ::testing::ValuesIn(policy_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(DiscountedScheduling, HeldPhaseIsReleasedAfterHalfItsSlack) {
  // Processor sharing co-locates a second phase at once; a scavenger's (slowdown 4) waits while
  // the normal phase runs, 3 x 22.9 / 2 = 34.3 s after its request, and no longer.
  const SchedulerConfig cfg = one_ssd(2);
  PolicyDriver run("fair-share", cfg);
  const AppId normal = run.reg(job("normal", 1), 0);
  const AppId patient = run.reg(job("patient", 4), 0);
  const AppId other = run.reg(job("other", 1), 0);
  run.request(normal, 0, 10 * GB, 0);
  run.request(patient, 0, 10 * GB, 5);
  const double release = 5 + 3 * alone_on_one_buffer(cfg, 10 * GB) / 2;
  ASSERT_TRUE(run.scheduler->next_release().has_value());
  EXPECT_DOUBLE_EQ(*run.scheduler->next_release(), release);
  run.scheduler->on_tick(release - 0.5);
  EXPECT_FALSE(run.actions.was_granted(patient, 0));
  run.scheduler->on_tick(release);
  EXPECT_TRUE(run.actions.was_granted(patient, 0));
  EXPECT_FALSE(run.scheduler->next_release().has_value());
  // A normal job in the same place is co-located at once: the wait was the class's doing.
  run.complete(patient, 0, release + 1);
  run.request(other, 0, 10 * GB, release + 2);
  EXPECT_TRUE(run.actions.was_granted(other, 0));
}

TEST(DiscountedScheduling, AScavengerYieldsToARelaxedJob) {
  PolicyDriver run("fair-share", one_ssd(2));
  const AppId relaxed = run.reg(job("relaxed", 2), 0);
  const AppId scavenger = run.reg(job("scavenger", 4), 0);
  run.request(relaxed, 0, 10 * GB, 0);
  run.request(scavenger, 0, 10 * GB, 1);
  EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{relaxed}));
}

// ---- the release of held-back phases ----

namespace {

/// Ticks the scheduler at each `next_release()` up to `until` (exclusive), as a host does, and
/// returns each phase granted at such a tick with the instant of its tick.
std::vector<std::pair<AppId, double>> tick_releases(PolicyDriver& run, double until) {
  std::vector<std::pair<AppId, double>> released;
  while (const auto at = run.scheduler->next_release()) {
    if (*at >= until) break;
    const size_t before = run.actions.grants.size();
    run.scheduler->on_tick(*at);
    for (size_t i = before; i < run.actions.grants.size(); ++i)
      released.emplace_back(run.actions.grants[i].app, *at);
    // A tick that released nothing and names the same instant again would loop forever.
    if (run.scheduler->next_release() == at) {
      ADD_FAILURE() << "next_release() stays at " << *at << " after a tick at that instant";
      break;
    }
  }
  return released;
}

}  // namespace

TEST(DiscountedScheduling, TheHoldBackThatExpiresFirstIsReleasedFirst) {
  // Fair-share grants every phase it sees at once, so a held phase is granted at its release. A
  // normal phase runs all along, so both patient phases yield. The scavenger asks first, at 0 s,
  // and may wait 3 x 22.9 / 2 = 34.3 s; the relaxed job asks at 10 s and may wait 22.9 / 2 =
  // 11.4 s, to 21.4 s. The relaxed phase is released first, at its own bound, though it asked
  // later; the scavenger's at its bound, not before and not at the relaxed one's.
  const SchedulerConfig cfg = one_ssd(3);
  PolicyDriver run("fair-share", cfg);
  const AppId normal = run.reg(job("normal", 1), 0);
  const AppId scavenger = run.reg(job("scavenger", 4), 0);
  const AppId relaxed = run.reg(job("relaxed", 2), 0);
  run.request(normal, 0, 10 * GB, 0);
  run.request(scavenger, 0, 10 * GB, 0);
  run.request(relaxed, 0, 10 * GB, 10);
  ASSERT_EQ(run.actions.granted_apps(), (std::vector<AppId>{normal}));

  const double alone = alone_on_one_buffer(cfg, 10 * GB);
  const double relaxed_release = 10 + alone / 2;
  const double scavenger_release = 3 * alone / 2;
  ASSERT_LT(relaxed_release, scavenger_release);
  ASSERT_TRUE(run.scheduler->next_release().has_value());
  EXPECT_DOUBLE_EQ(*run.scheduler->next_release(), relaxed_release);
  const auto released = tick_releases(run, 1000);
  EXPECT_EQ(released, (std::vector<std::pair<AppId, double>>{{relaxed, relaxed_release},
                                                             {scavenger, scavenger_release}}));
  EXPECT_FALSE(run.scheduler->next_release().has_value());
}

TEST(DiscountedScheduling, HeldPhaseIsReleasedOnTimeWhileTheNormalJobKeepsTheBufferBusy) {
  // The normal job writes 10 GB phases back to back, each 10 s, so a phase of it is always
  // running or asked for: the scavenger (asking at 5 s) would wait for ever without the bound.
  // It is granted at 5 + 3 x 22.9 / 2 = 39.3 s exactly, while the normal job's fourth phase
  // runs, and at none of the decisions before.
  const SchedulerConfig cfg = one_ssd(2);
  PolicyDriver run("fair-share", cfg);
  const AppId normal = run.reg(job("normal", 1), 0);
  const AppId scavenger = run.reg(job("scavenger", 4), 0);
  const double release = 5 + 3 * alone_on_one_buffer(cfg, 10 * GB) / 2;
  run.request(normal, 0, 10 * GB, 0);
  run.request(scavenger, 0, 10 * GB, 5);
  std::vector<std::pair<AppId, double>> released;
  for (int k = 1; k <= 6; ++k) {
    const double t = 10.0 * k;
    const auto at_ticks = tick_releases(run, t);
    released.insert(released.end(), at_ticks.begin(), at_ticks.end());
    // The next phase is asked for before the running one ends: the buffer is never free of it.
    run.request(normal, k, 10 * GB, t);
    run.complete(normal, k - 1, t);
    if (t < release) {
      EXPECT_FALSE(run.actions.was_granted(scavenger, 0)) << "at " << t << " s";
    }
  }
  EXPECT_EQ(released, (std::vector<std::pair<AppId, double>>{{scavenger, release}}));
  // Every phase of the normal job went at once: it never yielded to the scavenger.
  for (int k = 0; k <= 6; ++k) EXPECT_TRUE(run.actions.was_granted(normal, k)) << "phase " << k;
}

TEST_P(DiscountedScheduling, TheLeastPatientJobIsNeverHeldBack) {
  // One buffer, one phase at a time, under every policy. A relaxed and a scavenger job ask
  // together: the relaxed one is the least patient, so it goes at once; the scavenger's phase is
  // held (to 3 x 22.9 / 2 = 34.3 s). A normal job asks while the relaxed phase runs: it gets the
  // buffer when that phase ends, ahead of the scavenger that asked first. A relaxed phase asked
  // while the normal one runs is held (to 5 + 11.4 s), but goes as soon as the normal phase ends,
  // long before its bound: the relaxed job is then the least patient again.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SchedulerConfig cfg = one_ssd(1);
    cfg.seed = seed;
    cfg.max_running_apps = 0;  // all three jobs admitted (max-bandwidth's default is two)
    PolicyDriver run(GetParam(), cfg);
    const AppId relaxed = run.reg(job("relaxed", 2), 0);
    const AppId scavenger = run.reg(job("scavenger", 4), 0);
    const AppId normal = run.reg(job("normal", 1), 0);
    const double alone = alone_on_one_buffer(cfg, 10 * GB);
    run.request_together({scavenger, relaxed}, 10 * GB, 0);
    ASSERT_EQ(run.actions.granted_apps(), (std::vector<AppId>{relaxed})) << "seed " << seed;
    ASSERT_TRUE(run.scheduler->next_release().has_value());
    EXPECT_DOUBLE_EQ(*run.scheduler->next_release(), 3 * alone / 2);
    run.request(normal, 0, 10 * GB, 2);
    run.complete(relaxed, 0, 3);
    ASSERT_EQ(run.actions.granted_apps(), (std::vector<AppId>{relaxed, normal})) << "seed " << seed;
    run.request(relaxed, 1, 10 * GB, 5);
    ASSERT_TRUE(run.scheduler->next_release().has_value());
    EXPECT_DOUBLE_EQ(*run.scheduler->next_release(), 5 + alone / 2);
    run.complete(normal, 0, 6);
    EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{relaxed, normal, relaxed}))
        << "seed " << seed;
    EXPECT_EQ(run.actions.grants.back().index, 1);
  }
}

TEST(DiscountedScheduling, AReleasedPhaseKeepsItsPlaceInTheQueue) {
  // Fair-share grants in queue order whatever fits. One 200 GB buffer, 150 GB phases: one at a
  // time. A normal phase runs from 0 s; a scavenger asks at 1 s (held for 3 x 343 / 2 = 515 s),
  // another normal job at 2 s (waits for space). Each decision while the scavenger is held takes
  // it out of the queue and puts it back. When the first phase's data has drained, after the
  // scavenger's release, both may go: the scavenger, which asked first, is at the head.
  const SchedulerConfig cfg = one_ssd(2);
  const double bytes = 150 * GB;
  const double release = 1 + 3 * alone_on_one_buffer(cfg, bytes) / 2;
  PolicyDriver run("fair-share", cfg);
  const AppId first = run.reg(job("first", 1), 0);
  const AppId scavenger = run.reg(job("scavenger", 4), 0);
  const AppId second = run.reg(job("second", 1), 0);
  run.request(first, 0, bytes, 0);
  run.request(scavenger, 0, bytes, 1);
  run.request(second, 0, bytes, 2);
  run.complete(first, 0, release - 10);
  run.drained(0, bytes, release + 1);
  EXPECT_EQ(run.actions.granted_apps(), (std::vector<AppId>{first, scavenger}));
}

// ---- the records ----

TEST(Accounting, OneRecordPerJobWithItsStateBytesAndCharge) {
  PolicyDriver run("fair-share", one_ssd(2));
  AppInfo writer = job("writer", 2);
  writer.nodes = 2;
  writer.user = "alice";
  const AppId w = run.reg(writer, 10);
  const AppId r = run.reg(job("reader", 1), 10);
  run.request(w, 0, 10 * GB, 20);
  run.request_read(r, 0, 4 * GB, 20);  // staged in from the PFS first, 20 s to 25 s
  run.prefetched(r, 0, 25);
  run.complete(w, 0, 60);
  run.complete(r, 0, 30);
  run.end(w, 3610);

  PricingConfig pricing;
  pricing.node_hour_rate = 3;
  const auto records = accounting_records(*run.scheduler, pricing, 4000, 1000);
  ASSERT_EQ(records.size(), 2U);
  const auto& a = records[0];
  EXPECT_EQ(a.job_id, "1");
  EXPECT_EQ(a.job_name, "writer");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.qos, "relaxed");
  EXPECT_EQ(a.state, "COMPLETED");
  EXPECT_DOUBLE_EQ(a.submit, 1010);
  EXPECT_DOUBLE_EQ(a.start, 1010);
  EXPECT_DOUBLE_EQ(a.end, 4610);
  EXPECT_DOUBLE_EQ(a.elapsed, 3600);
  EXPECT_EQ(a.nnodes, 2);
  EXPECT_DOUBLE_EQ(a.bytes_written, 10 * GB);
  EXPECT_DOUBLE_EQ(a.bytes_read, 0);
  EXPECT_DOUBLE_EQ(a.io_time, 40);
  // Its phase asked before the reader's, so ran at once, 20 s to 60 s: 40 s over its time alone.
  EXPECT_DOUBLE_EQ(a.slowdown, 40 / alone_on_one_buffer(one_ssd(2), 10 * GB));
  EXPECT_DOUBLE_EQ(a.usage_factor, 0.7);
  EXPECT_DOUBLE_EQ(a.billed_node_hours, 2 * (3600 - a.refunded_seconds) / 3600);
  EXPECT_DOUBLE_EQ(a.charge, a.billed_node_hours * 3 * 0.7);

  const auto& b = records[1];
  EXPECT_EQ(b.user, "reader");  // no user: the job is its own
  EXPECT_EQ(b.state, "RUNNING");
  EXPECT_LT(b.end, 0);
  EXPECT_DOUBLE_EQ(b.elapsed, 4000 - 10);
  EXPECT_DOUBLE_EQ(b.bytes_read, 4 * GB);
  EXPECT_DOUBLE_EQ(b.bytes_written, 0);
  EXPECT_DOUBLE_EQ(b.charge, 1 * 3990 / 3600.0 * 3);
}

TEST(Accounting, ElapsedIsFormattedAsSacctDoes) {
  EXPECT_EQ(format_elapsed(0), "00:00:00");
  EXPECT_EQ(format_elapsed(3725.4), "01:02:05");
  EXPECT_EQ(format_elapsed(2 * 86400 + 61), "2-00:01:01");
}
