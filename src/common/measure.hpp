#pragma once
/// @file What the load generators measure with (harmonia-agentload, harmonia-siteload): the
/// monotonic clock and quantiles.

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace harmonia::common {

/// Seconds on the monotonic clock.
inline double monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The q-quantile (0 <= q <= 1) of `values`, interpolating linearly between order statistics;
/// 0 for none.
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto low = static_cast<std::size_t>(position);
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (position - static_cast<double>(low));
}

}  // namespace harmonia::common
