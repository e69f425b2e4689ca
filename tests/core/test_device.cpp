#include <gtest/gtest.h>

#include <stdexcept>

#include "core/device.hpp"

using harmonia::core::DeviceModel;
using harmonia::core::Op;

namespace {
// Fig. 3 of the Harmonia paper: interference factor of 8 concurrent instances per device.
struct Fig3 {
  const char* name;
  double if8;
};
}  // namespace

TEST(DeviceModel, SlopeReproducesFig3InterferenceAtEight) {
  for (const auto& d : {Fig3{"ram", 1.45}, Fig3{"nvme", 5.24}, Fig3{"ssd", 7.69},
                        Fig3{"hdd-fast", 10.52}, Fig3{"hdd", 11.90}}) {
    const auto dev = DeviceModel::from_slope(d.name, 500e6, 550e6, 2, (d.if8 - 1) / 7);
    EXPECT_NEAR(dev.interference_factor(8), d.if8, 1e-9) << d.name;
    EXPECT_DOUBLE_EQ(dev.interference_factor(1), 1.0);
  }
}

TEST(DeviceModel, SlopeNeverExceedsPeakAndReachesIt) {
  const auto ssd = DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557);
  double best = 0;
  for (int n = 1; n <= 64; ++n) {
    EXPECT_LE(ssd.efficiency(n), 1.0);
    if (n <= 32) best = std::max(best, ssd.efficiency(n));
  }
  EXPECT_DOUBLE_EQ(best, 1.0);
  // A device that degrades (slope > 1) peaks with one stream.
  const auto hdd = DeviceModel::from_slope("hdd", 95e6, 115e6, 1, 1.5571);
  EXPECT_DOUBLE_EQ(hdd.efficiency(1), 1.0);
  EXPECT_LT(hdd.aggregate_bw(4, Op::Write), hdd.aggregate_bw(1, Op::Write));
}

TEST(DeviceModel, MsccaFollowsEquationOne) {
  const auto dev = DeviceModel::from_curve("x", 100, 100, 4, {{1, 1.0}, {9, 0.5}});
  // n = 5 is halfway between the points: efficiency 0.75.
  EXPECT_DOUBLE_EQ(dev.efficiency(5), 0.75);
  EXPECT_DOUBLE_EQ(dev.msca(5), 5.0 / 4.0 * 0.25);
  // Constant past the last point.
  EXPECT_DOUBLE_EQ(dev.efficiency(100), 0.5);
  EXPECT_DOUBLE_EQ(dev.stream_bw(2, Op::Read), dev.aggregate_bw(2, Op::Read) / 2);
}

TEST(DeviceModel, MaxColocatedStopsAtFirstOverLimit) {
  const auto ssd = DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557);
  // I_f(n) = 1 + 0.9557 (n - 1): 4.82 at n = 5, 5.78 at n = 6.
  EXPECT_EQ(ssd.max_colocated(5.0), 5);
  EXPECT_EQ(ssd.max_colocated(1.0), 1);
}

TEST(DeviceModel, RejectsBadParameters) {
  EXPECT_THROW(DeviceModel::from_slope("x", 0, 1, 1, 0.5), std::invalid_argument);
  EXPECT_THROW(DeviceModel::from_slope("x", 1, 1, 0, 0.5), std::invalid_argument);
  EXPECT_THROW(DeviceModel::from_slope("x", 1, 1, 1, -0.1), std::invalid_argument);
  EXPECT_THROW(DeviceModel::from_curve("x", 1, 1, 1, {{2, 1.0}}), std::invalid_argument);
  EXPECT_THROW(DeviceModel::from_curve("x", 1, 1, 1, {{1, 1.0}, {1, 0.5}}), std::invalid_argument);
  EXPECT_THROW(DeviceModel::from_curve("x", 1, 1, 1, {{1, 1.5}}), std::invalid_argument);
}
