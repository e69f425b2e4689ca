// The scheduler daemon's one table of jobs: numbered in registration order, a key naming its live
// job, and an ended job's record kept without its processes.
#include <gtest/gtest.h>

#include "schedd/jobs.hpp"

using namespace harmonia::schedd;

namespace {

JobRecord job(const std::string& key, std::uint32_t ranks = 1) {
  JobRecord record;
  record.key = key;
  record.label = key.substr(key.find('/') + 1);
  record.ranks = ranks;
  return record;
}

}  // namespace

TEST(JobTable, NumbersJobsInTheOrderTheyAreAdded) {
  JobTable table;
  EXPECT_EQ(table.add(job("1000/b")), 0);
  EXPECT_EQ(table.add(job("1000/a")), 1);
  EXPECT_EQ(table.add(job("1001/a")), 2);
  EXPECT_EQ(table.at(1).label, "a");
  EXPECT_EQ(table.at(1).name(), "a") << "no name of its own: its label";
  EXPECT_EQ(table.live("1000/a"), 1);
  EXPECT_EQ(table.live("1001/a"), 2);
  EXPECT_FALSE(table.live("1002/a"));
  EXPECT_EQ(table.live_count(), 3U);
}

TEST(JobTable, AnEndedJobKeepsItsRecordWithoutItsProcesses) {
  JobTable table;
  const JobNumber first = table.add(job("1000/slurm-7", 16));
  table.at(first).live->processes = {1, 2};
  table.at(first).buffer.announced = {42};
  table.at(first).buffer.ended_early = {3};
  table.end(first);
  EXPECT_TRUE(table.at(first).ended());
  EXPECT_EQ(table.at(first).live, nullptr) << "its processes are gone";
  EXPECT_TRUE(table.at(first).buffer.announced.empty());
  EXPECT_EQ(table.at(first).buffer.ended_early, std::set<int>{3}) << "completed when granted";
  EXPECT_EQ(table.at(first).ranks, 16U);
  EXPECT_FALSE(table.live("1000/slurm-7"));
  EXPECT_EQ(table.latest("1000/slurm-7"), first) << "its data on the nodes is still its";
  EXPECT_EQ(table.live_count(), 0U);
  EXPECT_EQ(table.size(), 1U);
}

TEST(JobTable, AKeyUsedAgainNamesTheNewJob) {
  JobTable table;
  const JobNumber first = table.add(job("1000/a"));
  EXPECT_THROW(table.add(job("1000/a")), std::logic_error) << "one live job per key";
  table.end(first);
  const JobNumber second = table.add(job("1000/a", 4));
  EXPECT_NE(second, first);
  EXPECT_EQ(table.live("1000/a"), second);
  EXPECT_EQ(table.latest("1000/a"), second);
  EXPECT_TRUE(table.at(first).ended());
  EXPECT_FALSE(table.at(second).ended());
}

TEST(JobTable, ListsTheLiveJobsInTheOrderOfTheirKeys) {
  JobTable table;
  table.add(job("1001/a"));
  const JobNumber ended = table.add(job("1000/c"));
  table.add(job("1000/b"));
  table.end(ended);
  const std::vector<JobNumber> live = table.live_by_key();
  ASSERT_EQ(live.size(), 2U);
  EXPECT_EQ(table.at(live[0]).key, "1000/b");
  EXPECT_EQ(table.at(live[1]).key, "1001/a");
}

TEST(JobTable, WithoutBufferNodesAnEndedJobKeepsOnlyItsNumber) {
  JobTable table(/*keeps_ended=*/false);
  const JobNumber first = table.add(job("1000/a"));
  table.end(first);
  EXPECT_TRUE(table.at(first).ended());
  EXPECT_FALSE(table.latest("1000/a")) << "nothing asks whose data a node holds";
  EXPECT_TRUE(table.at(first).key.empty());
  EXPECT_TRUE(table.at(first).label.empty());
  const JobNumber second = table.add(job("1000/a"));
  EXPECT_EQ(second, first + 1) << "numbers are not reused";
  EXPECT_EQ(table.latest("1000/a"), second);
  table.end(second);
  EXPECT_FALSE(table.latest("1000/a"));
}
