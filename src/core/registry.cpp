#include "core/registry.hpp"

#include <stdexcept>
#include <utility>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {
using Factory = std::unique_ptr<Scheduler> (*)(SchedulerConfig, Actions&);
struct Entry {
  std::string name;
  PolicyFamily family;
  Factory make;
};
const std::vector<Entry>& registry() {
  using enum PolicyFamily;
  static const std::vector<Entry> table = {
      {"datawarp", Baseline, make_datawarp},
      {"max-buffer-efficiency", Harmonia, make_max_buffer_efficiency},
      {"priority", Harmonia, make_priority},
      {"max-bandwidth", Harmonia, make_max_bandwidth},
      {"fairness", Harmonia, make_fairness},
      {"min-stall", Harmonia, make_min_stall},
      // Peers (docs/scheduling-model.md section 8).
      {"fair-share", Peer, make_fair_share},
      {"io-sets", Peer, make_io_sets},
      {"themisio-job", Peer, make_themisio_job},
      {"themisio-user", Peer, make_themisio_user},
      {"themisio-size", Peer, make_themisio_size},
      {"slurm-easy", Peer, make_slurm_easy},
      {"slurm-easy-sjf", Peer, make_slurm_easy_sjf},
      {"plan-based", Peer, make_plan_based},
      // Automatic choice among the others (docs/scheduling-model.md section 10).
      {"auto", Auto, make_auto},
  };
  return table;
}

const Entry& entry(const std::string& name) {
  for (const auto& e : registry())
    if (e.name == name) return e;
  throw std::invalid_argument("unknown policy '" + name + "'");
}
}  // namespace

const char* family_name(PolicyFamily family) {
  switch (family) {
    case PolicyFamily::Baseline:
      return "baseline";
    case PolicyFamily::Harmonia:
      return "harmonia";
    case PolicyFamily::Peer:
      return "peer";
    case PolicyFamily::Auto:
      return "auto";
  }
  return "unknown";
}

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& e : registry()) names.push_back(e.name);
  return names;
}

PolicyFamily policy_family(const std::string& name) { return entry(name).family; }

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, SchedulerConfig config,
                                          Actions& actions) {
  return entry(name).make(std::move(config), actions);
}

}  // namespace harmonia::core
