#include "netsim/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace harmonia::netsim {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw std::invalid_argument("quantile of no values");
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("quantile: q must be in [0, 1]");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Distribution summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<long>(values.size());
  // Summing sorted values keeps the result independent of the order samples arrived in.
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(squares / static_cast<double>(values.size()));
  d.min = values.front();
  d.q1 = quantile(values, 0.25);
  d.median = quantile(values, 0.5);
  d.q3 = quantile(values, 0.75);
  d.p90 = quantile(values, 0.90);
  d.p99 = quantile(values, 0.99);
  d.max = values.back();
  return d;
}

}  // namespace harmonia::netsim
