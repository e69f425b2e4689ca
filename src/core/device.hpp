#pragma once
/// @file Storage device model: aggregate bandwidth versus number of concurrent streams, and the
/// Harmonia paper's MSCA (Eq. 1) and interference factor (Eq. 2) derived from it.

#include <string>
#include <utility>
#include <vector>

namespace harmonia::core {

enum class Op { Write, Read };

/// A storage medium under concurrent access. `efficiency(n)` is the aggregate bandwidth that n
/// concurrent streams get together, as a fraction of the peak bandwidth.
class DeviceModel {
 public:
  /// Build from a measured curve: (n, aggregate fraction) points, n strictly increasing from 1.
  /// Between points the fraction is interpolated linearly; beyond the last point it stays constant.
  static DeviceModel from_curve(std::string name, double write_bw, double read_bw, int concurrency,
                                const std::vector<std::pair<int, double>>& points);

  /// Build from an interference slope s: n equal streams are each slowed down by
  /// I_f(n) = 1 + s (n - 1) relative to one stream alone (the linear fit of the paper's Fig. 3),
  /// normalised so that the best aggregate over 1..32 streams is the peak bandwidth.
  static DeviceModel from_slope(std::string name, double write_bw, double read_bw, int concurrency,
                                double slope);

  const std::string& name() const { return name_; }
  int concurrency() const { return concurrency_; }
  double peak_bw(Op op) const { return op == Op::Write ? write_bw_ : read_bw_; }

  /// Aggregate bandwidth fraction for n >= 1 concurrent streams (n = 0 gives 0).
  double efficiency(int n) const;
  /// Aggregate bandwidth of n concurrent streams.
  double aggregate_bw(int n, Op op) const { return peak_bw(op) * efficiency(n); }
  /// Bandwidth each of n equal concurrent streams gets.
  double stream_bw(int n, Op op) const { return n <= 0 ? 0.0 : aggregate_bw(n, op) / n; }
  /// Eq. 2 for n equal streams started together: time with n streams over time alone.
  double interference_factor(int n) const;
  /// Eq. 1: (n / device concurrency) * (peak - aggregate(n)) / peak.
  double msca(int n) const;
  /// Largest n with interference_factor(n) <= limit (at least 1): the constraint X.
  int max_colocated(double if_limit) const;

 private:
  DeviceModel(std::string name, double write_bw, double read_bw, int concurrency,
              std::vector<double> efficiency_by_n);

  std::string name_;
  double write_bw_;
  double read_bw_;
  int concurrency_;
  std::vector<double> efficiency_by_n_;  // index n-1; constant past the end
};

}  // namespace harmonia::core
