// Harmonia "Minimum Application Stall Time" (paper IV-B5, Eq. 7): minimise the time phases wait
// plus the time interference adds to them; who goes first is random (seeded).
#include "core/policies/optimizing_policy.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

Objective min_stall_objective() {
  Objective objective;
  // Eq. 7: W_time + I_time. A deferred phase is expected to wait for half the backlog (its
  // expected completion less its own interference-free I/O time).
  objective.group_value = [](const GroupView& g) {
    double value = 0;
    for (size_t k = 0; k < g.phases.size(); ++k)
      value -= g.phases[k].waited + (g.predictions[k].io - g.predictions[k].io_alone);
    return value;
  };
  objective.deferred_value = [](const Candidate& c, const Deferral& d) {
    return -(c.waited + d.mean_until_done() - d.slice);
  };
  return objective;
}

std::unique_ptr<Scheduler> make_min_stall(SchedulerConfig config, Actions& actions) {
  return std::make_unique<OptimizingPolicy>(
      std::move(config), actions,
      PolicyTraits{min_stall_objective(), CandidateOrder::Random, false, DrainMode::Overlap});
}

}  // namespace harmonia::core
