// Cross-application coordination strategies (BBIO, section III) on hand-checked event sequences.
#include <gtest/gtest.h>

#include "core/coordination/coordinator.hpp"

using namespace harmonia::core::coordination;

namespace {

CoordinatorConfig servers(int n, FlushOrder order = FlushOrder::Free, double window = 1.0) {
  return {n, order, window};
}

JobInfo job(const std::string& name, double bytes_per_process = 16e6, int processes = 4,
            int priority = 0) {
  return {name, processes, bytes_per_process, priority};
}

bool stages(const Coordinator& c, JobId j) { return c.directive(j).mode == Mode::Stage; }
bool may_flush(const Coordinator& c, JobId j) { return c.directive(j).flush_allowed; }

}  // namespace

TEST(Coordination, RegistryKnowsEveryStrategyAndRejectsUnknown) {
  EXPECT_EQ(coordinator_names().size(), 8u);
  for (const auto& name : coordinator_names())
    EXPECT_NE(make_coordinator(name, servers(8)), nullptr);
  EXPECT_THROW(make_coordinator("4c", servers(8)), std::invalid_argument);
  EXPECT_THROW(parse_flush_order("sometimes"), std::invalid_argument);
  EXPECT_EQ(parse_flush_order("window"), FlushOrder::Window);
}

TEST(Coordination, NoCoordinationLetsEveryoneWrite) {
  auto c = make_coordinator("none", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  EXPECT_FALSE(stages(*c, a));
  EXPECT_FALSE(stages(*c, b));
  EXPECT_TRUE(c->directive(a).servers.empty());
}

TEST(Coordination, Strategy1aFirstComerStagesAndBlocksUntilSecondEnds) {
  auto c = make_coordinator("1a", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  EXPECT_FALSE(stages(*c, a)) << "alone, A writes through";
  c->on_io_begin(b, 2);
  EXPECT_TRUE(stages(*c, a)) << "A stages as B enters its I/O phase";
  EXPECT_FALSE(stages(*c, b));
  c->on_flush_request(a, 3);
  EXPECT_FALSE(may_flush(*c, a)) << "stage and block: A waits for B";
  c->on_io_end(b, 4);
  EXPECT_TRUE(may_flush(*c, a));
  EXPECT_FALSE(stages(*c, a)) << "after flushing it continues writing directly";
}

TEST(Coordination, Strategy1bFlushesWhenOutOfWork) {
  auto c = make_coordinator("1b", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  EXPECT_TRUE(stages(*c, a));
  c->on_flush_request(a, 3);
  EXPECT_TRUE(may_flush(*c, a)) << "stage and flush: no waiting for B";
}

TEST(Coordination, Strategy2aSecondComerStagesUntilFirstEnds) {
  auto c = make_coordinator("2a", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  EXPECT_FALSE(stages(*c, a));
  EXPECT_TRUE(stages(*c, b));
  c->on_flush_request(b, 3);
  EXPECT_FALSE(may_flush(*c, b));
  // B's own phase may end before A's: its staged data keeps its place in line.
  c->on_io_end(b, 4);
  EXPECT_FALSE(may_flush(*c, b));
  c->on_io_end(a, 5);
  EXPECT_TRUE(may_flush(*c, b));
  c->on_flush_done(b, 6);
  EXPECT_FALSE(stages(*c, b));
}

TEST(Coordination, Strategy2bFlushesOnRequest) {
  auto c = make_coordinator("2b", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  EXPECT_TRUE(stages(*c, b));
  c->on_flush_request(b, 3);
  EXPECT_TRUE(may_flush(*c, b));
}

TEST(Coordination, FirstComeFirstServedWithThreeJobs) {
  // Fig. 14: strategies applied first-come first-served: only the head of the line writes.
  auto c = make_coordinator("2a", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0),
              x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  c->on_io_begin(x, 3);
  EXPECT_FALSE(stages(*c, a));
  EXPECT_TRUE(stages(*c, b));
  EXPECT_TRUE(stages(*c, x));
  c->on_io_end(a, 4);
  EXPECT_FALSE(stages(*c, b)) << "B is next";
  EXPECT_TRUE(stages(*c, x));
}

TEST(Coordination, Strategy3aSplitsServersByDataSize) {
  // Paper III-B: 8 servers, A writes 48 MB per process and B 16 MB, same process count: 6 and 2.
  auto c = make_coordinator("3a", servers(8));
  const JobId a = c->on_register(job("A", 48e6), 0), b = c->on_register(job("B", 16e6), 0);
  EXPECT_EQ(c->directive(a).servers, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(c->directive(b).servers, (std::vector<int>{6, 7}));
  EXPECT_FALSE(stages(*c, a));
}

TEST(Coordination, Strategy3bPartitionsOnlyWhileBothWrite) {
  auto c = make_coordinator("3b", servers(8));
  const JobId a = c->on_register(job("A", 48e6), 0), b = c->on_register(job("B", 16e6), 0);
  c->on_io_begin(a, 1);
  EXPECT_TRUE(c->directive(a).servers.empty()) << "alone: every server";
  c->on_io_begin(b, 2);
  EXPECT_EQ(c->directive(a).servers.size(), 6u);
  EXPECT_EQ(c->directive(b).servers, (std::vector<int>{6, 7}));
  c->on_io_end(b, 3);
  EXPECT_TRUE(c->directive(a).servers.empty()) << "A goes back to all 8";
}

TEST(Coordination, Strategy3bSplitsFirstComeFirstServedAmongThree) {
  // Fig. 14: A shares the 8 servers with B, then B shares its 4 with C.
  auto c = make_coordinator("3b", servers(8));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0),
              x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  EXPECT_EQ(c->directive(a).servers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c->directive(b).servers, (std::vector<int>{4, 5, 6, 7}));
  c->on_io_begin(x, 3);
  EXPECT_EQ(c->directive(a).servers, (std::vector<int>{0, 1, 2, 3})) << "A keeps its half";
  EXPECT_EQ(c->directive(b).servers, (std::vector<int>{4, 5}));
  EXPECT_EQ(c->directive(x).servers, (std::vector<int>{6, 7}));
  c->on_io_end(b, 4);
  EXPECT_EQ(c->directive(a).servers, (std::vector<int>{0, 1, 2, 3})) << "C now follows A";
  EXPECT_EQ(c->directive(x).servers, (std::vector<int>{4, 5, 6, 7}));
}

TEST(Coordination, Strategy3aSplitDoesNotDependOnRegistrationOrder) {
  // B registers first: still 6 and 2 (the remainders tie at 0.5 before the minimums of one).
  auto c = make_coordinator("3a", servers(8));
  const JobId b = c->on_register(job("B", 16e6), 0), a = c->on_register(job("A", 48e6), 0);
  EXPECT_EQ(c->directive(b).servers, (std::vector<int>{0, 1}));
  EXPECT_EQ(c->directive(a).servers, (std::vector<int>{2, 3, 4, 5, 6, 7}));
  // Three jobs of 1, 1 and 10 units on 4 servers: quotas 0.33, 0.33, 3.33; minimums of one
  // leave the big job 2.
  auto d = make_coordinator("3a", servers(4));
  const JobId x = d->on_register(job("x", 1e6), 0), y = d->on_register(job("y", 1e6), 0),
              z = d->on_register(job("z", 10e6), 0);
  EXPECT_EQ(d->directive(x).servers.size() + d->directive(y).servers.size(), 2u);
  EXPECT_EQ(d->directive(z).servers.size(), 2u);
}

TEST(Coordination, PartitionGivesEveryJobAServerEvenWhenOutnumbered) {
  auto c = make_coordinator("3a", servers(2));
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(c->on_register(job("J" + std::to_string(i)), 0));
  for (JobId j : ids) {
    EXPECT_EQ(c->directive(j).servers.size(), 1u);
    EXPECT_LT(c->directive(j).servers[0], 2);
  }
}

TEST(Coordination, TokenSerialisesFlushesInRequestOrder) {
  auto c = make_coordinator("1b", servers(8, FlushOrder::Token));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0),
              x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  c->on_io_begin(x, 3);  // newest first: C writes, A and B stage
  c->on_flush_request(b, 4);
  c->on_flush_request(a, 5);
  EXPECT_TRUE(may_flush(*c, b)) << "B asked first: it holds the token";
  EXPECT_FALSE(may_flush(*c, a));
  c->on_flush_done(b, 6);
  EXPECT_TRUE(may_flush(*c, a)) << "the token passes on";
}

TEST(Coordination, PriorityFlushesTheMostImportantFirst) {
  auto c = make_coordinator("1b", servers(8, FlushOrder::Priority));
  const JobId low = c->on_register(job("low", 16e6, 4, 1), 0);
  const JobId mid = c->on_register(job("mid", 16e6, 4, 5), 0);
  const JobId high = c->on_register(job("high", 16e6, 4, 9), 0);
  const JobId head = c->on_register(job("head"), 0);
  for (JobId j : {low, mid, high, head}) c->on_io_begin(j, 1 + j);
  c->on_flush_request(low, 10);
  EXPECT_TRUE(may_flush(*c, low)) << "alone in line, it gets the turn";
  c->on_flush_request(mid, 11);
  c->on_flush_request(high, 12);
  EXPECT_FALSE(may_flush(*c, high)) << "a running flush is not interrupted";
  c->on_flush_done(low, 13);
  EXPECT_TRUE(may_flush(*c, high)) << "then the highest priority, though it asked last";
  EXPECT_FALSE(may_flush(*c, mid));
  c->on_flush_done(high, 14);
  EXPECT_TRUE(may_flush(*c, mid));
}

TEST(Coordination, WindowsRotateAmongWaitingJobs) {
  auto c = make_coordinator("1b", servers(8, FlushOrder::Window, 10.0));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0),
              x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  c->on_io_begin(x, 3);
  c->on_flush_request(a, 4);
  c->on_flush_request(b, 4);
  c->on_tick(5);  // window 0: the first waiting job
  EXPECT_TRUE(may_flush(*c, a));
  EXPECT_FALSE(may_flush(*c, b));
  c->on_tick(15);  // window 1
  EXPECT_FALSE(may_flush(*c, a));
  EXPECT_TRUE(may_flush(*c, b));
  c->take_changed();
  c->on_tick(25);  // window 2: back to A
  EXPECT_TRUE(may_flush(*c, a));
  const auto changed = c->take_changed();
  EXPECT_EQ(changed, (std::vector<JobId>{a, b}));
}

TEST(Coordination, UnregisteredJobsReleaseTheirTurnAndBadIdsThrow) {
  auto c = make_coordinator("2a", servers(8, FlushOrder::Token));
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(b, 2);
  c->on_unregister(a, 3);  // A died: B heads the line
  EXPECT_FALSE(stages(*c, b));
  EXPECT_THROW(c->on_io_begin(42, 4), std::out_of_range);
  EXPECT_THROW(c->on_io_begin(a, 4), std::logic_error);
  EXPECT_THROW(c->on_register(JobInfo{"zero", 0, 1, 0}, 5), std::invalid_argument);
}

TEST(Coordination, ThrottleSlowsLaterComersOnlyWhileSeveralWrite) {
  CoordinatorConfig config = servers(8);
  config.throttle_gap = 0.003;
  auto c = make_coordinator("throttle", config);
  const JobId a = c->on_register(job("A"), 0), b = c->on_register(job("B"), 0),
              x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  EXPECT_EQ(c->directive(a).min_request_gap, 0) << "alone: full speed";
  c->on_io_begin(b, 2);
  c->on_io_begin(x, 3);
  EXPECT_EQ(c->directive(a).min_request_gap, 0) << "the first comer keeps its pace";
  EXPECT_EQ(c->directive(b).min_request_gap, 0.003);
  EXPECT_EQ(c->directive(x).min_request_gap, 0.003);
  EXPECT_FALSE(stages(*c, b)) << "throttling, not staging";
  c->on_io_end(a, 4);
  EXPECT_EQ(c->directive(b).min_request_gap, 0) << "B is now first";
  EXPECT_EQ(c->directive(x).min_request_gap, 0.003);
  c->on_io_end(x, 5);
  EXPECT_EQ(c->directive(b).min_request_gap, 0) << "alone again";
  EXPECT_EQ(c->directive(x).min_request_gap, 0) << "out of its phase";
  config.throttle_gap = 0;
  EXPECT_THROW(make_coordinator("throttle", config), std::invalid_argument);
}

TEST(Coordination, IdleJobsKeepTheirDirectivesAndAreNotRecomputed) {
  // Many registered jobs, few in I/O phases: phase events change only the competing jobs'
  // directives, and take_changed lists exactly those.
  for (const char* name : {"2a", "3b", "throttle"}) {
    auto c = make_coordinator(name, servers(8));
    std::vector<JobId> ids;
    for (int k = 0; k < 1000; ++k) ids.push_back(c->on_register(job("J"), 0));
    c->take_changed();
    c->on_io_begin(ids[10], 1);
    c->on_io_begin(ids[500], 2);
    const auto changed = c->take_changed();
    for (JobId id : changed) EXPECT_TRUE(id == 10 || id == 500) << name << ": job " << id;
    EXPECT_FALSE(changed.empty()) << name;
    c->on_io_end(ids[10], 3);
    c->on_io_end(ids[500], 4);
    for (JobId id : ids) EXPECT_EQ(c->directive(id), Directive{}) << name << ": job " << id;
  }
}

TEST(Coordination, ATokenHeldTooLongWhileOthersWaitPassesOn) {
  for (const FlushOrder order : {FlushOrder::Token, FlushOrder::Priority}) {
    CoordinatorConfig config = servers(8, order);
    config.max_token_seconds = 5;
    auto c = make_coordinator("1b", config);
    // The holder has the highest priority: even then it may not keep the token for ever.
    const JobId hog = c->on_register(job("hog", 16e6, 4, 9), 0);
    const JobId b = c->on_register(job("B", 16e6, 4, 1), 0);
    const JobId x = c->on_register(job("C"), 0);
    c->on_io_begin(hog, 1);
    c->on_io_begin(b, 2);
    c->on_io_begin(x, 3);
    c->on_flush_request(hog, 4);
    c->on_flush_request(b, 4.5);
    EXPECT_TRUE(may_flush(*c, hog));
    c->on_tick(8.9);
    EXPECT_FALSE(may_flush(*c, b)) << "within the bound the holder keeps the token";
    c->on_tick(9.1);
    EXPECT_TRUE(may_flush(*c, b)) << "past 5 s the next waiting job gets it";
    EXPECT_FALSE(may_flush(*c, hog)) << "and the holder goes to the back of the line";
    c->on_flush_done(b, 10);
    EXPECT_TRUE(may_flush(*c, hog)) << "its turn comes again";
  }
}

TEST(Coordination, ATokenHeldLongWithNobodyWaitingStays) {
  CoordinatorConfig config = servers(8, FlushOrder::Token);
  config.max_token_seconds = 5;
  auto c = make_coordinator("1b", config);
  const JobId a = c->on_register(job("A"), 0), x = c->on_register(job("C"), 0);
  c->on_io_begin(a, 1);
  c->on_io_begin(x, 2);
  c->on_flush_request(a, 3);
  c->on_tick(100);
  EXPECT_TRUE(may_flush(*c, a));
}
