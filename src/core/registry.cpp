#include "core/registry.hpp"

#include <stdexcept>
#include <utility>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {
using Factory = std::unique_ptr<Scheduler> (*)(SchedulerConfig, Actions&);
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"datawarp", make_datawarp}, {"max-buffer-efficiency", make_max_buffer_efficiency},
      {"priority", make_priority}, {"max-bandwidth", make_max_bandwidth},
      {"fairness", make_fairness}, {"min-stall", make_min_stall},
  };
  return table;
}
}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, SchedulerConfig config,
                                          Actions& actions) {
  for (const auto& [known, factory] : registry())
    if (known == name) return factory(std::move(config), actions);
  throw std::invalid_argument("unknown policy '" + name + "'");
}

}  // namespace harmonia::core
