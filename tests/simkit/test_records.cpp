// The recorder's results writer shared by harmonia-sim and harmonia-schedd.
#include <gtest/gtest.h>

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
  const auto out = simkit::phases_json({p}, [](int app) { return "app" + std::to_string(app); });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["app"], "app1");
  EXPECT_EQ(out[0]["wait"], 2.0);
  EXPECT_EQ(out[0]["io"], 4.0);
  EXPECT_EQ(out[0]["buffers"], nlohmann::json::array({0, 2}));
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
