#include <stdexcept>
#include <utility>

#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

std::vector<std::string> coordinator_names() {
  return {"none", "1a", "1b", "2a", "2b", "3a", "3b", "throttle"};
}

std::unique_ptr<Coordinator> make_coordinator(const std::string& name, CoordinatorConfig config) {
  if (name == "none") return make_no_coordination(config);
  if (name == "1a") return make_staging_order(config, true, false);
  if (name == "1b") return make_staging_order(config, true, true);
  if (name == "2a") return make_staging_order(config, false, false);
  if (name == "2b") return make_staging_order(config, false, true);
  if (name == "3a") return make_partitioning(config, false);
  if (name == "3b") return make_partitioning(config, true);
  if (name == "throttle") return make_throttle(config);
  throw std::invalid_argument("unknown coordination strategy '" + name +
                              "' (none, 1a, 1b, 2a, 2b, 3a, 3b, throttle)");
}

namespace {
const std::vector<std::pair<std::string, FlushOrder>>& flush_orders() {
  static const std::vector<std::pair<std::string, FlushOrder>> table = {
      {"free", FlushOrder::Free},
      {"token", FlushOrder::Token},
      {"window", FlushOrder::Window},
      {"priority", FlushOrder::Priority},
  };
  return table;
}
}  // namespace

std::vector<std::string> flush_order_names() {
  std::vector<std::string> names;
  for (const auto& [name, order] : flush_orders()) names.push_back(name);
  return names;
}

FlushOrder parse_flush_order(const std::string& name) {
  for (const auto& [known, order] : flush_orders())
    if (known == name) return order;
  throw std::invalid_argument("unknown flush order '" + name + "' (free, token, window, priority)");
}

}  // namespace harmonia::core::coordination
