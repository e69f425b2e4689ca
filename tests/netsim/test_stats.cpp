#include <gtest/gtest.h>

#include <cmath>

#include "netsim/stats.hpp"

using namespace harmonia::netsim;

TEST(Stats, QuantilesInterpolateLikeNumpy) {
  const std::vector<double> sorted{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile(sorted, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(sorted, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile(sorted, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(sorted, 0.75), 3.25);
  EXPECT_DOUBLE_EQ(quantile(sorted, 1.0), 4);
  EXPECT_THROW(quantile({}, 0.5), std::invalid_argument);
  EXPECT_THROW(quantile(sorted, 1.5), std::invalid_argument);
}

TEST(Stats, SummaryOfUnsortedValues) {
  const auto d = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(d.count, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_DOUBLE_EQ(d.median, 3);
  EXPECT_DOUBLE_EQ(d.q1, 2);
  EXPECT_DOUBLE_EQ(d.q3, 4);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 5);
  EXPECT_DOUBLE_EQ(d.stddev, std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
}

TEST(Stats, HeavyTailPullsTheMeanAboveTheMedian) {
  std::vector<double> values(99, 1.0);
  values.push_back(101.0);
  const auto d = summarize(values);
  EXPECT_DOUBLE_EQ(d.median, 1.0);
  EXPECT_DOUBLE_EQ(d.mean, 2.0);
  EXPECT_DOUBLE_EQ(d.max, 101.0);
}

TEST(Stats, EmptyInputGivesZeros) {
  const auto d = summarize({});
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.mean, 0);
}
