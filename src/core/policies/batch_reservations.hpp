#pragma once
/// @file What the batch-reservation peers (`slurm-easy`, `plan-based`) share: each job asks for
/// burst-buffer capacity (its declared I/O) and a time limit, holds the capacity from its start
/// until its stage-out ends and its nodes until it ends.

#include <deque>
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

/// What the batch-reservation peers share: jobs queue in submission order, start when the
/// policy's `schedule` says so (holding their capacity until their stage-out ends), and are
/// scheduled again whenever one arrives or frees nodes or capacity; in a job, I/O is as under
/// DataWarp (every phase at once on every buffer, staged in before and out after the job).
class BatchReservationPolicy : public Scheduler {
 public:
  BatchReservationPolicy(SchedulerConfig config, Actions& actions);

 protected:
  void admit_on_register(AppId app, double now) override;
  bool drain_before_app_end(AppId) const override { return false; }
  double flush_threshold() const override { return 0.0; }
  int backup_flushers() const override { return 0; }
  // A job's input is staged in before it starts and stays in its reservation until it ends.
  bool stages_in_before_start() const override { return true; }
  void on_app_drained(AppId app, double now) override;
  void on_nodes_freed(double now) override { schedule(now); }
  void decide(double now) override { grant_on_every_buffer(now); }

  /// Starts the queued jobs the policy chooses (with `start`).
  virtual void schedule(double now) = 0;
  /// The job leaves the queue, holds its capacity and is admitted.
  void start(AppId app, double now);
  double request_of(AppId app) const;
  double walltime_of(AppId app) const;
  /// Releases of the started jobs' capacity and nodes (none for a job that ended), earliest
  /// first.
  std::vector<Release> releases(double now) const;

  std::deque<AppId> queue_;  ///< waiting jobs, in submission order
  CapacityHoldings holdings_;
};

}  // namespace harmonia::core
