// Read phases (paper IV-B, "Additional discussion"): "Instead of a write I/O phase followed by a
// flushing, read operations involve a prefetching (i.e., loading of the data) before the read I/O
// phase." Every policy is held to the same contract (docs/scheduling-model.md section 7): the
// prefetch starts before the read, takes buffer space from its start, the read runs on the
// buffers its data was staged onto and only once it is there, and the space is released after
// the read unless the cached hint or a batch reservation keeps it. The batch-queue policies
// (datawarp, slurm-easy, slurm-easy-sjf, plan-based) stage a job's input in before the job starts.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/registry.hpp"
#include "recording_actions.hpp"

using namespace harmonia::core;
using namespace harmonia::core::testing;

namespace {

constexpr double kRead = 40 * GB;

bool stages_in_before_start(const std::string& policy) {
  return policy == "datawarp" || policy == "slurm-easy" || policy == "slurm-easy-sjf" ||
         policy == "plan-based";
}

AppInfo reader(Hint hint = Hint::Flushable) {
  return {.name = "reader",
          .nodes = 4,
          .hint = hint,
          .declared_bytes = kRead,
          .declared_reads = {{.index = 0, .bytes = kRead, .op = Op::Read}}};
}

/// Position of `entry` in the actions' log, or -1.
long position(const RecordingActions& actions, const std::string& entry) {
  const auto it = std::find(actions.log.begin(), actions.log.end(), entry);
  return it == actions.log.end() ? -1 : it - actions.log.begin();
}

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

/// Registers the reader and gets its read phase 0 announced and prefetch started at t=10 (before
/// the job starts under the batch policies, during its computation under the others).
AppId start_reader(PolicyDriver& run, const std::string& policy, Hint hint = Hint::Flushable) {
  const AppId app = run.reg(reader(hint), 0);
  if (stages_in_before_start(policy)) {
    EXPECT_FALSE(run.actions.was_admitted(app)) << "the job starts before its stage-in";
    EXPECT_EQ(run.actions.prefetches.size(), 1u);
    run.prefetched(app, 0, 10);
    EXPECT_TRUE(run.actions.was_admitted(app));
    run.announce_read(app, 0, kRead, 10);  // already staged: changes nothing
  } else {
    EXPECT_TRUE(run.actions.was_admitted(app));
    run.announce_read(app, 0, kRead, 10);
  }
  return app;
}

TEST_P(EveryPolicy, PrefetchStartsAheadTakesSpaceAndPrecedesTheRead) {
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  const AppId app = run.reg(reader(), 0);
  if (!stages_in_before_start(policy)) run.announce_read(app, 0, kRead, 10);
  // The stage-in starts before the application asks to read, and holds its bytes from its start.
  ASSERT_EQ(run.actions.prefetches.size(), 1u);
  const auto staged_on = run.actions.prefetches[0].buffers;
  EXPECT_DOUBLE_EQ(run.used(), kRead);
  for (BufferId b : staged_on)
    EXPECT_DOUBLE_EQ(run.buffers()[static_cast<size_t>(b)].used, kRead / staged_on.size());
  EXPECT_FALSE(run.actions.was_granted(app, 0));
  if (stages_in_before_start(policy)) {
    EXPECT_FALSE(run.actions.was_admitted(app));
    run.prefetched(app, 0, 50);
    ASSERT_TRUE(run.actions.was_admitted(app));
    EXPECT_LT(position(run.actions, "prefetch 0.0"), position(run.actions, "admit 0"));
  }
  if (stages_in_before_start(policy)) {
    run.request_read(app, 0, kRead, 100);
  } else {
    // Requested while its data is still on the way: it waits for the data.
    run.request_read(app, 0, kRead, 30);
    EXPECT_FALSE(run.actions.was_granted(app, 0)) << "read granted before its data arrived";
    run.prefetched(app, 0, 100);
  }
  ASSERT_TRUE(run.actions.was_granted(app, 0));
  EXPECT_LT(position(run.actions, "prefetch 0.0"), position(run.actions, "grant 0.0"));
  EXPECT_EQ(run.actions.grant_of(app)->buffers, staged_on) << "read away from its data";
  EXPECT_DOUBLE_EQ(run.used(), kRead);
  // The read's wait is from its request to its grant: the prefetch it waited for.
  const auto& phase = run.scheduler->recorder().phases().back();
  EXPECT_EQ(phase.op, Op::Read);
  EXPECT_DOUBLE_EQ(phase.granted, 100);

  run.complete(app, 0, 150);
  // A copy of PFS data is never drained to the PFS.
  for (const auto& b : run.buffers()) EXPECT_DOUBLE_EQ(b.drainable(), 0);
  if (stages_in_before_start(policy))
    EXPECT_DOUBLE_EQ(run.used(), kRead) << "the reservation keeps its input until the job ends";
  else
    EXPECT_DOUBLE_EQ(run.used(), 0) << "space not released after the read";
  run.end(app, 160);
  EXPECT_DOUBLE_EQ(run.used(), 0);
  EXPECT_TRUE(run.actions.drain_starts.empty()) << "staged-in data was drained";
  EXPECT_TRUE(run.scheduler->apps()[0].drained);
}

TEST_P(EveryPolicy, UnannouncedReadIsPrefetchedWhenRequested) {
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  const AppId app = run.reg({.name = "reader", .nodes = 4, .declared_bytes = kRead}, 0);
  run.request_read(app, 0, kRead, 5);
  ASSERT_EQ(run.actions.prefetches.size(), 1u);
  EXPECT_FALSE(run.actions.was_granted(app, 0));
  EXPECT_DOUBLE_EQ(run.used(), kRead);
  run.prefetched(app, 0, 85);
  ASSERT_TRUE(run.actions.was_granted(app, 0));
  EXPECT_DOUBLE_EQ(run.scheduler->recorder().phases().back().granted, 85);
}

TEST_P(EveryPolicy, PrefetchWaitsForSpaceLikeAWrite) {
  // A writer fills 95 % of every buffer; its data drains after it ends. The reader's 40 GB
  // prefetch needs 10 GB per buffer: it may not start until the drain made room.
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  const AppId writer = run.reg({.name = "writer", .nodes = 4, .declared_bytes = 380 * GB}, 0);
  run.request(writer, 0, 380 * GB, 0);
  ASSERT_TRUE(run.actions.was_granted(writer, 0));
  run.complete(writer, 0, 100);
  run.end(writer, 100);
  const AppId app = run.reg(reader(), 110);
  if (!stages_in_before_start(policy)) run.announce_read(app, 0, kRead, 110);
  EXPECT_TRUE(run.actions.prefetches.empty()) << "prefetch placed on space that is not free";
  for (BufferId b = 0; b < 4; ++b) run.drained(b, 95 * GB, 300);
  ASSERT_EQ(run.actions.prefetches.size(), 1u);
  EXPECT_DOUBLE_EQ(run.used(), kRead);
}

TEST_P(EveryPolicy, CachedReadAfterWriteReadsWhereTheDataLies) {
  // The cached hint keeps a job's output on the buffers; reading it back needs no prefetch, and
  // runs on the buffers that hold it.
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  AppInfo info{.name = "restart", .nodes = 4, .hint = Hint::Cached, .declared_bytes = 60 * GB};
  info.declared_reads = {{.index = 1, .bytes = 20 * GB, .op = Op::Read, .source_phase = 0}};
  const AppId app = run.reg(info, 0);
  ASSERT_TRUE(run.actions.was_admitted(app));
  run.request(app, 0, 20 * GB, 0);
  ASSERT_TRUE(run.actions.was_granted(app, 0));
  const auto written_on = run.actions.grant_of(app)->buffers;
  run.complete(app, 0, 40);
  run.announce_read(app, 1, 20 * GB, 40, 0);
  run.request_read(app, 1, 20 * GB, 60, 0);
  EXPECT_TRUE(run.actions.prefetches.empty()) << "cached data fetched again from the PFS";
  ASSERT_TRUE(run.actions.was_granted(app, 1));
  EXPECT_EQ(run.actions.grants.back().buffers, written_on);
  EXPECT_DOUBLE_EQ(run.used(), 20 * GB) << "the read charged space for data already there";
  run.complete(app, 1, 100);
  run.end(app, 100);
  // Its data drains to the PFS once the job ends, as cached data always does.
  double drainable = 0;
  for (const auto& b : run.buffers()) drainable += b.drainable();
  EXPECT_DOUBLE_EQ(drainable, 20 * GB);
}

TEST_P(EveryPolicy, CachedHintKeepsStagedInDataUntilTheJobEnds) {
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  const AppId app = start_reader(run, policy, Hint::Cached);
  if (!stages_in_before_start(policy)) run.prefetched(app, 0, 40);
  run.request_read(app, 0, kRead, 60);
  ASSERT_TRUE(run.actions.was_granted(app, 0));
  run.complete(app, 0, 140);
  EXPECT_DOUBLE_EQ(run.used(), kRead);
  run.end(app, 150);
  EXPECT_DOUBLE_EQ(run.used(), 0);
  EXPECT_TRUE(run.actions.drain_starts.empty());
}

INSTANTIATE_TEST_SUITE_P(ReadPhases, EveryPolicy, ::testing::ValuesIn(policy_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ReadPhases, FlushableReadAfterWriteDrainedIsPrefetched) {
  // Flushable data may leave the buffers after its phase: once drained, reading it back stages it
  // in from the PFS again.
  PolicyDriver run("min-stall", ssd_buffers(4, 100 * GB));
  const AppId app = run.reg({.name = "ckpt", .nodes = 4, .declared_bytes = 40 * GB}, 0);
  run.request(app, 0, 20 * GB, 0);
  run.complete(app, 0, 40);
  for (BufferId b : run.actions.grant_of(app)->buffers)
    run.drained(b, run.buffers()[static_cast<size_t>(b)].drainable(), 80);
  run.request_read(app, 1, 20 * GB, 90, 0);
  EXPECT_EQ(run.actions.prefetches.size(), 1u);
  EXPECT_FALSE(run.actions.was_granted(app, 1));
}

TEST(ReadPhases, SourceDataIsPinnedWhileItIsRead) {
  // Flushable data still on the buffers is read there, and may not drain under the read.
  PolicyDriver run("min-stall", ssd_buffers(4, 100 * GB));
  const AppId app = run.reg({.name = "ckpt", .nodes = 4, .declared_bytes = 40 * GB}, 0);
  run.request(app, 0, 20 * GB, 0);
  run.complete(app, 0, 40);
  run.request_read(app, 1, 20 * GB, 41, 0);
  ASSERT_TRUE(run.actions.was_granted(app, 1));
  EXPECT_TRUE(run.actions.prefetches.empty());
  for (const auto& b : run.buffers()) EXPECT_DOUBLE_EQ(b.drainable(), 0);
  run.complete(app, 1, 60);
  double drainable = 0;
  for (const auto& b : run.buffers()) drainable += b.drainable();
  EXPECT_DOUBLE_EQ(drainable, 20 * GB);
}

TEST(ReadPhases, RejectsMalformedReads) {
  PolicyDriver run("fairness", ssd_buffers(2, 100 * GB));
  const AppId app = run.reg({.name = "a", .nodes = 1}, 0);
  EXPECT_THROW(run.scheduler->on_prefetch_request({app, 0, 10 * GB, Op::Write}, 0),
               std::invalid_argument);
  EXPECT_THROW(run.scheduler->on_prefetch_request({app, 0, 0, Op::Read}, 0), std::invalid_argument);
  EXPECT_THROW(run.scheduler->on_prefetched(app, 0, 0), std::logic_error);
  run.request_read(app, 0, 10 * GB, 0);
  EXPECT_THROW(run.scheduler->on_phase_request({app, 0, 10 * GB, Op::Read}, 0), std::logic_error);
}

}  // namespace

namespace {

TEST_P(EveryPolicy, CachedDataLetsItsOwnerWriteAgainAndKeepsOthersOut) {
  // IV-B: with the cached hint, "Harmonia will not schedule other I/O phases on the same buffer
  // until it is safe": other applications' phases, not the owner's own next phase.
  const std::string policy = GetParam();
  PolicyDriver run(policy, ssd_buffers(4, 100 * GB));
  const AppId owner =
      run.reg({.name = "restart", .nodes = 4, .hint = Hint::Cached, .declared_bytes = 40 * GB}, 0);
  run.request(owner, 0, 20 * GB, 0);
  ASSERT_TRUE(run.actions.was_granted(owner, 0));
  run.complete(owner, 0, 40);
  run.request(owner, 1, 20 * GB, 100);
  EXPECT_TRUE(run.actions.was_granted(owner, 1)) << "the owner cannot use its own buffers";
}

}  // namespace
