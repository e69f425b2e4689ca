// The DataWarp reservation rules of the paper's challenges (c) and (d) (section II): temporary
// extensions for jobs that write past their reservation, and lending the unused space of
// write-only reservations to queued jobs.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/registry.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

SchedulerConfig one_buffer(bool extend, bool lend) {
  SchedulerConfig c = ssd_buffers(1, 100 * GB);
  c.extend_reservations = extend;
  c.lend_write_only = lend;
  return c;
}

AppInfo job(const std::string& name, double reservation, bool write_only = false) {
  AppInfo info{.name = name, .declared_bytes = reservation};
  info.write_only = write_only;
  return info;
}

/// DataWarp on the one buffer of `one_buffer`.
struct Driver : PolicyDriver {
  explicit Driver(SchedulerConfig cfg) : PolicyDriver("datawarp", std::move(cfg)) {}
  void drained(double bytes, double now) { PolicyDriver::drained(0, bytes, now); }
};

}  // namespace

TEST(Extension, AccountsTheOverflowSoNoQueuedJobIsAdmittedOnIt) {
  Driver d(one_buffer(true, false));
  const AppId a = d.reg(job("a", 40 * GB), 0);
  d.request(a, 0, 40 * GB, 1);  // within the reservation
  d.complete(a, 0, 2);
  d.request(a, 1, 30 * GB, 3);  // 30 GB past it: extended out of the 60 GB unreserved
  EXPECT_TRUE(d.actions.was_granted(a, 1)) << "the job goes on instead of failing";
  // 40 reserved + 30 extension: a 40 GB job does not fit in the 30 GB left.
  const AppId b = d.reg(job("b", 40 * GB), 4);
  EXPECT_FALSE(d.actions.was_admitted(b));
  // A 30 GB job does.
  const AppId c = d.reg(job("c", 30 * GB), 4);
  EXPECT_FALSE(d.actions.was_admitted(c)) << "FCFS: c is behind b";
  d.complete(a, 1, 5);
  d.end(a, 6);
  d.drained(70 * GB, 7);
  EXPECT_TRUE(d.actions.was_admitted(b)) << "the extension is freed with the reservation";
  EXPECT_TRUE(d.actions.was_admitted(c));
}

TEST(Extension, OverflowWithoutUnreservedCapacityWaitsAndHoldsTheQueue) {
  Driver d(one_buffer(true, false));
  const AppId a = d.reg(job("a", 50 * GB), 0);
  const AppId b = d.reg(job("b", 50 * GB), 0);
  d.request(b, 0, 20 * GB, 1);
  d.request(a, 0, 60 * GB, 1);  // 10 GB past its reservation; nothing unreserved
  EXPECT_FALSE(d.actions.was_granted(a, 0)) << "b runs: its stage-out will free capacity";
  const AppId c = d.reg(job("c", 45 * GB), 2);
  d.complete(b, 0, 4);
  d.end(b, 5);
  d.drained(20 * GB, 6);
  // b's 50 GB are unreserved again: a's 10 GB extension comes before the queued c, which no
  // longer fits (50 + 10 + 45 > 100).
  EXPECT_TRUE(d.actions.was_granted(a, 0));
  EXPECT_FALSE(d.actions.was_admitted(c));
  d.complete(a, 0, 7);
  d.end(a, 8);
  d.drained(60 * GB, 9);
  EXPECT_TRUE(d.actions.was_admitted(c));
}

TEST(Extension, WhenEveryJobWaitsForOneTheOldestOvercommits) {
  Driver d(one_buffer(true, false));
  const AppId a = d.reg(job("a", 50 * GB), 0);
  const AppId b = d.reg(job("b", 50 * GB), 0);
  d.request(a, 0, 30 * GB, 1);
  d.request(b, 0, 30 * GB, 1);
  d.complete(a, 0, 2);
  d.complete(b, 0, 2);
  // Both 20 GB past their reservations, nothing unreserved, nothing running or draining.
  d.scheduler->on_phase_request({b, 1, 40 * GB, Op::Write, 0}, 3);
  d.scheduler->on_phase_request({a, 1, 40 * GB, Op::Write, 0}, 3);
  d.scheduler->on_tick(3);
  EXPECT_TRUE(d.actions.was_granted(b, 1)) << "the oldest request goes on, not a deadlock";
  EXPECT_FALSE(d.actions.was_granted(a, 1)) << "only one at a time";
}

TEST(Extension, OffByDefaultTheOverflowIsNotAccounted) {
  Driver d(one_buffer(false, false));
  const AppId a = d.reg(job("a", 40 * GB), 0);
  d.request(a, 0, 70 * GB, 1);
  EXPECT_TRUE(d.actions.was_granted(a, 0));
  const AppId b = d.reg(job("b", 60 * GB), 2);
  EXPECT_TRUE(d.actions.was_admitted(b)) << "today's model: only the 40 GB are reserved";
}

TEST(Lending, AQueuedJobUsesTheUnusedSpaceOfAWriteOnlyReservation) {
  Driver d(one_buffer(false, true));
  const AppId a = d.reg(job("a", 80 * GB, true), 0);
  const AppId b = d.reg(job("b", 50 * GB), 0);
  EXPECT_TRUE(d.actions.was_admitted(b)) << "80 reserved, 20 free + 80 unused write-only";
  // Not lent when the reservation is not write-only.
  Driver plain(one_buffer(false, true));
  plain.reg(job("a", 80 * GB), 0);
  const AppId pb = plain.reg(job("b", 50 * GB), 0);
  EXPECT_FALSE(plain.actions.was_admitted(pb));
  // Nor when lending is off.
  Driver off(one_buffer(false, false));
  off.reg(job("a", 80 * GB, true), 0);
  const AppId ob = off.reg(job("b", 50 * GB), 0);
  EXPECT_FALSE(off.actions.was_admitted(ob));
  (void)a;
}

TEST(Lending, OnlySpaceTheLenderDoesNotHoldIsLent) {
  Driver d(one_buffer(false, true));
  const AppId a = d.reg(job("a", 80 * GB, true), 0);
  d.request(a, 0, 60 * GB, 1);  // holds 60 of its 80: 20 unused + 20 free
  const AppId b = d.reg(job("b", 50 * GB), 2);
  EXPECT_FALSE(d.actions.was_admitted(b));
  const AppId c = d.reg(job("c", 10 * GB), 2);
  EXPECT_FALSE(d.actions.was_admitted(c)) << "FCFS: c is behind b";
  // Write-only data is staged out as soon as its phase completes, and the space comes back.
  d.complete(a, 0, 3);
  EXPECT_EQ(d.actions.drain_starts.size(), 1u) << "write-only data drains before the job ends";
  d.drained(60 * GB, 4);
  EXPECT_TRUE(d.actions.was_admitted(b));
  EXPECT_TRUE(d.actions.was_admitted(c));
}

TEST(Lending, TheLendersPhaseReclaimsTheSpaceBeforeABorrowersPhase) {
  Driver d(one_buffer(false, true));
  const AppId a = d.reg(job("a", 80 * GB, true), 0);
  const AppId b = d.reg(job("b", 60 * GB), 0);
  ASSERT_TRUE(d.actions.was_admitted(b));
  d.request(b, 0, 60 * GB, 1);
  ASSERT_TRUE(d.actions.was_granted(b, 0));
  // 40 GB free. The borrower asks first, the lender second, both 40 GB, in the same instant.
  d.scheduler->on_phase_request({b, 1, 40 * GB, Op::Write, 0}, 2);
  d.scheduler->on_phase_request({a, 0, 40 * GB, Op::Write, 0}, 2);
  d.scheduler->on_tick(2);
  EXPECT_TRUE(d.actions.was_granted(a, 0)) << "the lender takes its space back";
  EXPECT_FALSE(d.actions.was_granted(b, 1));
}

TEST(Reservation, AJobOfTheWholeCapacityStillFitsAfterYearsOfJobs) {
  // Shares added to and drained from the buffers leave rounding dust in their counts; over a
  // long trace it outgrew the byte tolerance, and a job reserving the whole capacity then
  // waited at the head of the queue forever (a 300,000-job trace stalled this way).
  constexpr int kBuffers = 3;
  constexpr double kCapacity = 100 * GB;
  PolicyDriver d("datawarp", ssd_buffers(kBuffers, kCapacity));
  const auto drain = [&](double bytes, double& now) {
    for (BufferId b = 0; b < kBuffers; ++b) {
      // In two chunks, as a node reports them.
      const double share = bytes / kBuffers, first = share * 0.37;
      d.drained(b, first, now);
      d.drained(b, share - first, now += 1);
    }
  };
  double now = 0;
  // One long job holds half the buffers while 20,000 others come and go beside it.
  const double held = 0.5 * kBuffers * kCapacity;
  const AppId holder = d.reg(job("holder", held), now);
  d.request(holder, 0, held, now += 1);
  d.complete(holder, 0, now += 1);
  for (int k = 0; k < 20000; ++k) {
    const double bytes = held * (1 + k % 97) / 97.3;
    const AppId a = d.reg(job("j" + std::to_string(k), bytes), now);
    d.request(a, 0, bytes, now += 1);
    d.complete(a, 0, now += 1);
    d.end(a, now += 1);
    drain(bytes, now);
  }
  d.end(holder, now += 1);
  drain(held, now);
  for (const auto& buffer : d.scheduler->buffers()) EXPECT_EQ(buffer.used, 0.0);
  const AppId whole = d.reg(job("whole", kBuffers * kCapacity), now);
  EXPECT_TRUE(d.actions.was_admitted(whole));
  d.request(whole, 0, kBuffers * kCapacity, now += 1);
  EXPECT_TRUE(d.actions.was_granted(whole, 0));
}
