// The recorder's results writer shared by harmonia-sim and harmonia-schedd.
#include <gtest/gtest.h>

#include <sstream>

#include "simkit/records.hpp"

using namespace harmonia;

TEST(Records, PhasesCarryTheirWaitAndIoAndTheAppName) {
  core::PhaseRecord p;
  p.app = 1;
  p.index = 2;
  p.bytes = 1e9;
  p.requested = 3;
  p.granted = 5;
  p.end = 9;
  p.buffers = {0, 2};
  const auto out = simkit::phase_json(p, "app1");
  EXPECT_EQ(out["app"], "app1");
  EXPECT_EQ(out["wait"], 2.0);
  EXPECT_EQ(out["io"], 4.0);
  EXPECT_EQ(out["buffers"], nlohmann::json::array({0, 2}));
}

TEST(Records, DrainsThatMovedNothingAreLeftOut) {
  std::vector<core::DrainRecord> drains(2);
  drains[0].buffer = 0;
  drains[0].bytes = 0;
  drains[1].buffer = 3;
  drains[1].bytes = 5e8;
  const auto out = simkit::drains_json(drains);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["buffer"], 3);
  EXPECT_EQ(out[0]["bytes"], 5e8);
}

TEST(Records, MetricsKeepTheDocumentedOrder) {
  core::SystemMetrics s;
  s.makespan = 7;
  const auto out = simkit::metrics_json(s);
  EXPECT_EQ(out.begin().key(), "buffer_efficiency");
  EXPECT_EQ(out["makespan"], 7.0);
  EXPECT_EQ(out.size(), 15u);
}

TEST(Records, TheObjectWriterWritesWhatTheDocumentWouldHold) {
  std::vector<core::AppMetrics> apps(2);
  apps[0].name = "a \"quoted\" name";
  apps[1].name = "b";
  apps[1].bytes = 4e9;
  std::vector<core::DrainRecord> drains(3);
  drains[1].buffer = 2;
  drains[1].bytes = 1e6;
  std::ostringstream text;
  simkit::ObjectWriter out(text);
  out.member("policy", "fifo");
  out.array("apps", apps, simkit::app_json);
  out.array("drains", drains, simkit::drain_json);
  out.array("prefetches", std::vector<core::PrefetchRecord>{},
            [](const core::PrefetchRecord& p) { return simkit::prefetch_json(p, "x"); });
  out.member("sim", {{"events", 3}});
  out.finish();

  const auto parsed = nlohmann::ordered_json::parse(text.str());
  nlohmann::ordered_json expected;
  expected["policy"] = "fifo";
  expected["apps"] = {simkit::app_json(apps[0]), simkit::app_json(apps[1])};
  expected["drains"] = simkit::drains_json(drains);
  expected["prefetches"] = nlohmann::ordered_json::array();
  expected["sim"] = {{"events", 3}};
  EXPECT_EQ(parsed, expected);
  EXPECT_EQ(parsed["drains"].size(), 1u) << "drains that moved nothing are left out";
  // One array element a line: a reader can follow the file, and no line holds the whole run.
  std::istringstream lines(text.str());
  int app_lines = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"interference_factor\"") != std::string::npos) ++app_lines;
  EXPECT_EQ(app_lines, 2);
}
