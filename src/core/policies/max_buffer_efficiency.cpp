// Harmonia "Maximum Buffer System Efficiency" (paper IV-B1, Eq. 4): keep buffers serving I/O
// while keeping their remaining capacity high; drains run as soon as data is there, alongside I/O.
#include "core/policies/optimizing_policy.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

Objective max_buffer_efficiency_objective(double total_capacity) {
  Objective objective;
  // Eq. 4 per decision: the rise in B_U (buffers that start serving an application, as a
  // fraction of all buffers) and the fall in C_R (capacity the group consumes), averaged.
  objective.group_value = [total_capacity](const GroupView& g) {
    int newly_busy = 0;
    for (const auto& b : g.buffers) newly_busy += b.phases == 0 ? 1 : 0;
    double bytes = 0;
    for (const auto& c : g.phases) bytes += c.bytes;
    return (double(newly_busy) / g.total_buffers - bytes / total_capacity) / 2;
  };
  objective.deferred_value = [](const Candidate&, const Deferral&) { return 0.0; };
  return objective;
}

// IV-B1's example runs app 1, then app 2 overlapping its computation with app 1's I/O: "The rest
// of the apps will be scheduled once one of the previous apps finishes."
constexpr int kRunningApps = 2;

std::unique_ptr<Scheduler> make_max_buffer_efficiency(SchedulerConfig config, Actions& actions) {
  auto objective = max_buffer_efficiency_objective(config.buffer_capacity * config.buffer_count);
  return std::make_unique<OptimizingPolicy>(
      std::move(config), actions,
      PolicyTraits{objective, CandidateOrder::Fcfs, false, DrainMode::Overlap, kRunningApps});
}

}  // namespace harmonia::core
