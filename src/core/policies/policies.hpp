#pragma once
/// @file Factories of the scheduling policies, one per file in this folder; the registry
/// (core/registry.hpp) maps names to them.

#include <memory>

#include "core/optimizer.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core {

std::unique_ptr<Scheduler> make_datawarp(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_max_buffer_efficiency(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_priority(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_max_bandwidth(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_fairness(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_min_stall(SchedulerConfig config, Actions& actions);
// Peers from the literature after Harmonia (docs/scheduling-model.md section 8).
std::unique_ptr<Scheduler> make_fair_share(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_io_sets(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_themisio_job(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_themisio_user(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_themisio_size(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_slurm_easy(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_slurm_easy_sjf(SchedulerConfig config, Actions& actions);
std::unique_ptr<Scheduler> make_plan_based(SchedulerConfig config, Actions& actions);
/// Chooses among the others at each window by simulating ahead (policies/auto.hpp).
std::unique_ptr<Scheduler> make_auto(SchedulerConfig config, Actions& actions);
/// IO-Sets' set of a characteristic time w: i with 10^i <= w < 10^(i+1).
int io_set_of(double characteristic_time);

// The DP policies' cost functions, exposed for tests and benchmarks.
Objective max_buffer_efficiency_objective(double total_capacity);
Objective max_bandwidth_objective();
Objective fairness_objective();
Objective min_stall_objective();

}  // namespace harmonia::core
