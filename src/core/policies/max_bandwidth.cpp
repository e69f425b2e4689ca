// Harmonia "Maximum Application Bandwidth" (paper IV-B3, Eq. 5): phases run exclusively on their
// buffers, never alongside another phase or a drain; a phase may wait if that gives it more
// bandwidth. Which application goes first is random (seeded).
#include "core/policies/optimizing_policy.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

Objective max_bandwidth_objective() {
  Objective objective;
  // Eq. 5: IOSize / CompletionTime of each phase, completion counted from its request.
  objective.group_value = [](const GroupView& g) {
    double value = 0;
    for (size_t k = 0; k < g.phases.size(); ++k)
      value += g.phases[k].bytes / (g.phases[k].waited + g.predictions[k].io);
    return value;
  };
  objective.deferred_value = [](const Candidate& c, const Deferral& d) {
    return c.bytes / (c.waited + d.mean_until_done());
  };
  return objective;
}

// IV-B3: "To be able to offer maximum bandwidth, we can see that up to 2 concurrent applications
// are scheduled."
constexpr int kRunningApps = 2;

std::unique_ptr<Scheduler> make_max_bandwidth(SchedulerConfig config, Actions& actions) {
  return std::make_unique<OptimizingPolicy>(
      std::move(config), actions,
      PolicyTraits{max_bandwidth_objective(), CandidateOrder::Random, true, DrainMode::YieldToIO,
                   kRunningApps});
}

}  // namespace harmonia::core
