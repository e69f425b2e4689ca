#include "core/device.hpp"

#include <algorithm>
#include <stdexcept>

namespace harmonia::core {

namespace {
constexpr int kCurveSamples = 64;
constexpr int kMeasuredRange = 32;  // the paper measures 1..32 concurrent ranks (section III-A)

void check_device(const std::string& name, double write_bw, double read_bw, int concurrency) {
  if (!(write_bw > 0) || !(read_bw > 0))
    throw std::invalid_argument("device " + name + ": bandwidths must be > 0");
  if (concurrency < 1) throw std::invalid_argument("device " + name + ": concurrency must be >= 1");
}
}  // namespace

DeviceModel::DeviceModel(std::string name, double write_bw, double read_bw, int concurrency,
                         std::vector<double> efficiency_by_n)
    : name_(std::move(name)),
      write_bw_(write_bw),
      read_bw_(read_bw),
      concurrency_(concurrency),
      efficiency_by_n_(std::move(efficiency_by_n)) {}

DeviceModel DeviceModel::from_curve(std::string name, double write_bw, double read_bw,
                                    int concurrency,
                                    const std::vector<std::pair<int, double>>& points) {
  check_device(name, write_bw, read_bw, concurrency);
  if (points.empty() || points.front().first != 1)
    throw std::invalid_argument("device " + name + ": curve must start at n = 1");
  for (size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].second > 0) || points[i].second > 1)
      throw std::invalid_argument("device " + name + ": curve fractions must be in (0, 1]");
    if (i > 0 && points[i].first <= points[i - 1].first)
      throw std::invalid_argument("device " + name + ": curve n must be strictly increasing");
  }
  const int last_n = std::max(points.back().first, kCurveSamples);
  std::vector<double> eff(static_cast<size_t>(last_n));
  size_t seg = 0;
  for (int n = 1; n <= last_n; ++n) {
    while (seg + 1 < points.size() && points[seg + 1].first <= n) ++seg;
    if (seg + 1 == points.size()) {
      eff[static_cast<size_t>(n - 1)] = points[seg].second;
    } else {
      const auto [n0, f0] = points[seg];
      const auto [n1, f1] = points[seg + 1];
      eff[static_cast<size_t>(n - 1)] = f0 + (f1 - f0) * (n - n0) / double(n1 - n0);
    }
  }
  return DeviceModel(std::move(name), write_bw, read_bw, concurrency, std::move(eff));
}

DeviceModel DeviceModel::from_slope(std::string name, double write_bw, double read_bw,
                                    int concurrency, double slope) {
  check_device(name, write_bw, read_bw, concurrency);
  if (!(slope >= 0)) throw std::invalid_argument("device " + name + ": slope must be >= 0");
  // Relative aggregate of n streams: n / I_f(n). Normalise by its best value over the measured
  // range so that the peak bandwidth of the datasheet is reached and never exceeded.
  auto relative = [slope](int n) { return n / (1.0 + slope * (n - 1)); };
  double best = 0;
  for (int n = 1; n <= kMeasuredRange; ++n) best = std::max(best, relative(n));
  std::vector<double> eff(kCurveSamples);
  for (int n = 1; n <= kCurveSamples; ++n)
    eff[static_cast<size_t>(n - 1)] = std::min(1.0, relative(n) / best);
  return DeviceModel(std::move(name), write_bw, read_bw, concurrency, std::move(eff));
}

double DeviceModel::efficiency(int n) const {
  if (n <= 0) return 0.0;
  const size_t idx = std::min(static_cast<size_t>(n), efficiency_by_n_.size()) - 1;
  return efficiency_by_n_[idx];
}

double DeviceModel::interference_factor(int n) const {
  if (n <= 1) return 1.0;
  return n * efficiency(1) / efficiency(n);
}

double DeviceModel::msca(int n) const { return double(n) / concurrency_ * (1.0 - efficiency(n)); }

int DeviceModel::max_colocated(double if_limit) const {
  // Stop at the first n over the limit: co-locating more streams must never look better again.
  int best = 1;
  while (best < static_cast<int>(efficiency_by_n_.size()) &&
         interference_factor(best + 1) <= if_limit)
    ++best;
  return best;
}

}  // namespace harmonia::core
