#pragma once
/// @file Scheduling policies by name.

#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.hpp"

namespace harmonia::core {

/// Where a policy comes from: the baseline Harmonia is compared with (DataWarp), the Harmonia
/// paper's own policies, a published scheduler that came after it, or the automatic choice among
/// them (`auto`).
enum class PolicyFamily { Baseline, Harmonia, Peer, Auto };

/// "baseline", "harmonia", "peer" or "auto".
const char* family_name(PolicyFamily family);

/// Names of every registered policy, baseline first.
std::vector<std::string> policy_names();
/// The family of a registered policy; throws std::invalid_argument for an unknown name.
PolicyFamily policy_family(const std::string& name);
/// A new scheduler running policy `name`; throws std::invalid_argument for an unknown name.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name, SchedulerConfig config,
                                          Actions& actions);

}  // namespace harmonia::core
