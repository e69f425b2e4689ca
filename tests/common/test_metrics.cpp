// The OpenMetrics text: histograms count into cumulative buckets, per-job families stay bounded,
// and the text is what the format requires (the runtime tests parse real scrapes with
// prometheus_client's parser).
#include <gtest/gtest.h>

#include "common/metrics.hpp"

using namespace harmonia::common::metrics;

TEST(Metrics, AHistogramCountsEachObservationInItsBucketAndAbove) {
  Histogram histogram({0.1, 1, 10});
  for (const double value : {0.05, 0.1, 0.5, 5.0, 50.0, 500.0}) histogram.observe(value);
  const auto snapshot = histogram.snapshot();
  EXPECT_EQ(snapshot.cumulative, (std::vector<std::uint64_t>{2, 3, 4, 6}));
  EXPECT_DOUBLE_EQ(snapshot.sum, 555.65);
  Exposition out;
  out.histogram("harmonia_test_seconds", "help", "seconds", snapshot);
  const std::string text = out.text();
  EXPECT_NE(text.find("harmonia_test_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("harmonia_test_seconds_bucket{le=\"+Inf\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("harmonia_test_seconds_count 6\n"), std::string::npos);
  EXPECT_NE(text.find("# UNIT harmonia_test_seconds seconds\n"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
}

TEST(Metrics, PerJobLabelsAreBoundedAndTheRestSummedAsOther) {
  std::vector<std::pair<std::string, double>> jobs;
  for (int k = 0; k < 100; ++k) jobs.emplace_back("job" + std::to_string(k), k);
  const auto samples = largest("job", jobs, 3);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].first, (Labels{{"job", "job99"}}));
  EXPECT_EQ(samples[2].first, (Labels{{"job", "job97"}}));
  EXPECT_EQ(samples[3].first, (Labels{{"job", "other"}}));
  EXPECT_DOUBLE_EQ(samples[3].second, 99 * 100 / 2 - 99 - 98 - 97);
  EXPECT_EQ(largest("job", {{"a", 1}}, 3).size(), 1u) << "no other when nothing is left out";
}

TEST(Metrics, CountersEndInTotalAndLabelValuesAreEscaped) {
  Exposition out;
  out.counter("harmonia_test_bytes", "Bytes \"moved\"", "bytes",
              {{Labels{{"job", "a\"b\\c\nd"}}, 3.0}});
  out.gauge("harmonia_test_time_seconds", "t", "seconds", 1795725932.632004);
  const std::string text = out.text();
  EXPECT_NE(text.find("# TYPE harmonia_test_bytes counter\n"), std::string::npos);
  EXPECT_NE(text.find("harmonia_test_bytes_total{job=\"a\\\"b\\\\c\\nd\"} 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("harmonia_test_time_seconds 1795725932.632004\n"), std::string::npos) << text;
}
