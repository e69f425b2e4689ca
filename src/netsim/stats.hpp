#pragma once
/// @file Summaries of per-transfer latencies: what the paper's box charts show (Fig. 2).

#include <vector>

namespace harmonia::netsim {

struct Distribution {
  long count = 0;
  double mean = 0;
  double stddev = 0;  ///< population standard deviation
  double min = 0;
  double q1 = 0;
  double median = 0;
  double q3 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

/// The q-quantile (0 <= q <= 1) of sorted values, interpolating linearly between order
/// statistics (numpy's default). Throws std::invalid_argument on an empty input.
double quantile(const std::vector<double>& sorted, double q);

/// Summary of `values` (any order); all zero for an empty input.
Distribution summarize(std::vector<double> values);

}  // namespace harmonia::netsim
