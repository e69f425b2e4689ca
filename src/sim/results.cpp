#include "sim/results.hpp"

#include <algorithm>
#include <vector>

#include "simkit/records.hpp"

namespace harmonia::sim {

using nlohmann::ordered_json;

void write_results(std::ostream& stream, const Scenario& scenario, const std::string& policy,
                   const RunResult& r) {
  simkit::ObjectWriter out(stream);
  const auto app_name = [&](int app) -> const std::string& {
    return r.apps.at(static_cast<size_t>(app)).name;
  };
  out.member("scenario", scenario.name);
  out.member("policy", policy);
  out.member("seed", scenario.seed);
  out.member("version", HARMONIA_VERSION);
  out.member("metrics", simkit::metrics_json(r.system));
  out.array("apps", r.apps, simkit::app_json);
  out.array("phases", r.phases,
            [&](const core::PhaseRecord& p) { return simkit::phase_json(p, app_name(p.app)); });
  out.array("drains", r.drains, simkit::drain_json);
  out.array("prefetches", r.prefetches, [&](const core::PrefetchRecord& p) {
    return simkit::prefetch_json(p, app_name(p.app));
  });
  out.member("sim", {{"events", r.events}});
  if (!r.control.empty()) {
    // The control plane (docs/node-agent.md): messages to and from the scheduler per phase, and
    // the time they add between a phase's first rank and its last connection holding the grant.
    long long messages = 0;
    std::vector<double> overhead;
    ordered_json phases = ordered_json::array();
    for (const auto& p : r.control) {
      messages += p.messages;
      overhead.push_back(p.overhead);
      phases.push_back({{"app", r.apps.at(static_cast<size_t>(p.app)).name},
                        {"index", p.index},
                        {"connections", p.connections},
                        {"messages", p.messages},
                        {"first_arrival", p.first_arrival},
                        {"all_granted", p.all_granted},
                        {"overhead", p.overhead}});
    }
    std::sort(overhead.begin(), overhead.end());
    const auto at = [&](double q) {
      return overhead[static_cast<size_t>(q * static_cast<double>(overhead.size() - 1))];
    };
    out.member("control", {{"messages", messages},
                           {"messages_per_phase",
                            static_cast<double>(messages) / static_cast<double>(r.control.size())},
                           {"heartbeats_at_most", r.heartbeats},
                           {"overhead_p50", at(0.5)},
                           {"overhead_p99", at(0.99)},
                           {"overhead_max", overhead.back()},
                           {"phases", phases}});
  }
  out.finish();
}

}  // namespace harmonia::sim
