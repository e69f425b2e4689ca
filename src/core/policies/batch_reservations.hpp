#pragma once
/// @file What the batch-reservation peers (`slurm-easy`, `plan-based`) share: each job asks for
/// burst-buffer capacity (its declared I/O) and a time limit, holds the capacity from its start
/// until its stage-out ends and its nodes until it ends.

#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "core/scheduler.hpp"

namespace harmonia::core {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

/// The capacity a job asks for: its declared I/O, at most everything there is.
double capacity_request(const AppState& app, double total_capacity);
/// Its time limit; infinite for a job without one (it is taken to run forever).
double time_limit(const AppState& app);

/// The burst-buffer capacity held by the jobs started, until each one's stage-out ends.
class CapacityHoldings {
 public:
  struct Holding {
    double bytes = 0;
    double expected_end = kNoLimit;  ///< start + time limit
  };

  explicit CapacityHoldings(double total) : total_(total) {}
  void hold(AppId app, double bytes, double expected_end) { held_[app] = {bytes, expected_end}; }
  void release(AppId app) { held_.erase(app); }
  /// Capacity no started job holds (dust left by summing requests counts as free).
  double free() const;
  double total() const { return total_; }
  const std::map<AppId, Holding>& held() const { return held_; }

 private:
  double total_;
  std::map<AppId, Holding> held_;
};

/// What a held reservation gives back, and when: capacity at the end of its stage-out, nodes at
/// the job's end, both expected at its time limit (not before `now`).
struct Release {
  double bytes = 0;
  int nodes = 0;
  double at = kNoLimit;
};

/// The releases of `holdings`, earliest first; `nodes_held(app)` is what the job still holds of
/// the compute nodes (none once it has ended).
std::vector<Release> expected_releases(const CapacityHoldings& holdings, double now,
                                       const std::function<int(AppId)>& nodes_held);

}  // namespace harmonia::core
