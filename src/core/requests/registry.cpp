#include "core/requests/registry.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {
using Factory = std::unique_ptr<RequestScheduler> (*)(OptionReader&);
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"fifo", make_fifo},   {"to", make_to},   {"to-agg", make_to_agg},
      {"hbrr", make_hbrr},   {"sjf", make_sjf}, {"mlf", make_mlf},
      {"aioli", make_aioli}, {"sw", make_sw},   {"twins", make_twins},
  };
  return table;
}

bool registered(const std::string& name) {
  const auto& table = registry();
  return std::any_of(table.begin(), table.end(), [&](const auto& e) { return e.first == name; });
}
}  // namespace

std::vector<std::string> request_scheduler_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<RequestScheduler> make_request_scheduler(const std::string& name,
                                                         const Options& options) {
  for (const auto& [key, value] : options) {
    const auto dot = key.find('.');
    if (dot == std::string::npos || dot == 0)
      throw std::invalid_argument(key +
                                  ": request-scheduler options are named <scheduler>.<option>");
    if (!registered(key.substr(0, dot)))
      throw std::invalid_argument(key + ": '" + key.substr(0, dot) +
                                  "' is not a request scheduler");
  }
  for (const auto& [known, factory] : registry())
    if (known == name) {
      OptionReader reader(name, options);
      auto scheduler = factory(reader);
      reader.finish();
      return scheduler;
    }
  throw std::invalid_argument("unknown request scheduler '" + name + "'");
}

std::vector<OptionSpec> request_scheduler_options(const std::string& name) {
  for (const auto& [known, factory] : registry())
    if (known == name) {
      auto reader = OptionReader::describing(name);
      factory(reader);
      return reader.asked();
    }
  throw std::invalid_argument("unknown request scheduler '" + name + "'");
}

}  // namespace harmonia::core::requests
