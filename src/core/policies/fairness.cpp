// Harmonia "Application Fairness" (paper IV-B4, Eq. 6): share the buffers among all applications
// up to X co-located phases, tolerating interference rather than making anyone wait; who goes
// first when not all fit is random (seeded).
#include <algorithm>

#include "core/policies/optimizing_policy.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

Objective fairness_objective() {
  Objective objective;
  // Eq. 6 (last minus first completion) is not additive over groups. The DP instead minimises
  // the longest predicted phase turnaround (request to end of I/O), a bottleneck objective it
  // solves exactly: no phase is left far behind the others. A deferred phase is charged the
  // worst case, the whole backlog, since the worst case is what this objective is about.
  objective.group_value = [](const GroupView& g) {
    double worst = 0;
    for (size_t k = 0; k < g.phases.size(); ++k)
      worst = std::max(worst, g.phases[k].waited + g.predictions[k].io);
    return -worst;
  };
  objective.deferred_value = [](const Candidate& c, const Deferral& d) {
    return -(c.waited + d.backlog);
  };
  objective.combine = Combine::Min;
  return objective;
}

std::unique_ptr<Scheduler> make_fairness(SchedulerConfig config, Actions& actions) {
  return std::make_unique<OptimizingPolicy>(
      std::move(config), actions,
      PolicyTraits{fairness_objective(), CandidateOrder::Random, false, DrainMode::Overlap});
}

}  // namespace harmonia::core
