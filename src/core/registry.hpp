#pragma once
/// @file Scheduling policies by name.

#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.hpp"

namespace harmonia::core {

/// Names of every registered policy, baseline first.
std::vector<std::string> policy_names();
/// A new scheduler running policy `name`; throws std::invalid_argument for an unknown name.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name, SchedulerConfig config,
                                          Actions& actions);

}  // namespace harmonia::core
