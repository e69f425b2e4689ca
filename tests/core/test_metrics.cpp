#include <gtest/gtest.h>

#include "core/metrics.hpp"

using harmonia::core::Recorder;

TEST(Recorder, ComputesPaperMetricsForAHandCheckedRun) {
  // One buffer of 100 bytes; two apps arriving at 0.
  Recorder r(1, 100);
  r.app_arrived(0, "a", 0);
  r.app_arrived(1, "b", 0);
  r.app_started(0, 0);
  r.app_started(1, 0);
  // a: computes 0-10, phase 10-20 (io_alone 10): no wait, no interference.
  r.phase_requested(0, 0, 50, 10);
  r.phase_granted(0, 0, {0}, 10, 10);
  r.buffer_changed(0, true, 50, 10);
  r.phase_completed(0, 0, 20);
  r.buffer_changed(0, false, 50, 20);
  r.app_ended(0, 20);
  // b: requests at 10, waits until 20, writes 20-40 (io_alone 10): 10 s of interference.
  r.phase_requested(1, 0, 50, 10);
  r.phase_granted(1, 0, {0}, 10, 20);
  r.buffer_changed(0, true, 100, 20);
  r.phase_completed(1, 0, 40);
  r.buffer_changed(0, false, 100, 40);
  r.app_ended(1, 40);

  const auto apps = r.app_metrics();
  EXPECT_DOUBLE_EQ(apps[0].completion, 20);
  EXPECT_DOUBLE_EQ(apps[0].compute, 10);
  EXPECT_DOUBLE_EQ(apps[1].wait, 10);
  EXPECT_DOUBLE_EQ(apps[1].io, 20);
  EXPECT_DOUBLE_EQ(apps[1].stall, 20);  // 10 waiting + 10 interference
  EXPECT_DOUBLE_EQ(apps[1].interference_factor, 2);

  const auto s = r.system_metrics();
  EXPECT_DOUBLE_EQ(s.makespan, 40);
  EXPECT_DOUBLE_EQ(s.fairness, 20);
  EXPECT_DOUBLE_EQ(s.avg_stall, 10);
  // Busy 10-40 of 40 s; free fraction 1 for 10 s, 0.5 for 10 s, 0 for 20 s.
  EXPECT_DOUBLE_EQ(s.buffer_utilization, 0.75);
  EXPECT_DOUBLE_EQ(s.remaining_capacity, (10 + 5) / 40.0);
  EXPECT_DOUBLE_EQ(s.buffer_efficiency, (0.75 + 15 / 40.0) / 2);
  // Eq. 5: 50/10 for a, 50/30 for b.
  EXPECT_DOUBLE_EQ(s.avg_phase_bandwidth, (5 + 50 / 30.0) / 2);
}
