#pragma once
/// @file Common shape of the Harmonia policies that solve Eq. 3: build the optimizer's input from
/// the scheduler state, solve, grant the chosen groups.

#include <random>
#include <unordered_map>

#include "core/optimizer.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core {

enum class CandidateOrder {
  Fcfs,    ///< by request time
  Random,  ///< by a seeded random key drawn once per phase (paper: "selection ... is random")
};

struct PolicyTraits {
  Objective objective;
  CandidateOrder order = CandidateOrder::Fcfs;
  bool exclusive = false;  ///< X = 1 whatever the device allows
  DrainMode drain_mode = DrainMode::Overlap;
  int max_running_apps = 0;  ///< the paper's admission limit for this policy; 0: none
};

class OptimizingPolicy : public Scheduler {
 public:
  /// At most this many pending phases enter one decision; the rest wait for the next one.
  static constexpr size_t kMaxCandidates = 64;

  OptimizingPolicy(SchedulerConfig config, Actions& actions, PolicyTraits traits);

 protected:
  void decide(double now) override;
  DrainMode drain_mode() const override { return traits_.drain_mode; }
  int default_max_running_apps() const override { return traits_.max_running_apps; }

 private:
  double order_key(const PendingPhase& p);
  /// Plans the candidates (pending indices, in policy order) on the buffers `usable` admits,
  /// and grants the plan.
  void decide_among(const std::vector<size_t>& candidates, AppId usable_by, double now);

  PolicyTraits traits_;
  std::mt19937_64 rng_;
  std::unordered_map<long long, double> random_keys_;
};

}  // namespace harmonia::core
