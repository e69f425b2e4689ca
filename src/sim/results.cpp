#include "sim/results.hpp"

#include <algorithm>
#include <vector>

namespace harmonia::sim {

nlohmann::ordered_json results_json(const Scenario& scenario, const std::string& policy,
                                    const RunResult& r) {
  using nlohmann::ordered_json;
  const auto& s = r.system;
  ordered_json out;
  out["scenario"] = scenario.name;
  out["policy"] = policy;
  out["seed"] = scenario.seed;
  out["version"] = HARMONIA_VERSION;
  out["metrics"] = {
      {"buffer_efficiency", s.buffer_efficiency},
      {"buffer_utilization", s.buffer_utilization},
      {"remaining_capacity", s.remaining_capacity},
      {"avg_phase_bandwidth", s.avg_phase_bandwidth},
      {"fairness", s.fairness},
      {"avg_stall", s.avg_stall},
      {"avg_completion", s.avg_completion},
      {"min_completion", s.min_completion},
      {"max_completion", s.max_completion},
      {"avg_wait", s.avg_wait},
      {"avg_io", s.avg_io},
      {"avg_compute", s.avg_compute},
      {"makespan", s.makespan},
      {"avg_app_bandwidth", s.avg_app_bandwidth},
      {"avg_interference_factor", s.avg_interference_factor},
  };
  out["apps"] = ordered_json::array();
  for (const auto& a : r.apps)
    out["apps"].push_back({{"name", a.name},
                           {"arrival", a.arrival},
                           {"start", a.start},
                           {"end", a.end},
                           {"completion", a.completion},
                           {"wait", a.wait},
                           {"compute", a.compute},
                           {"io", a.io},
                           {"stall", a.stall},
                           {"bytes", a.bytes},
                           {"bandwidth", a.bandwidth},
                           {"interference_factor", a.interference_factor}});
  out["phases"] = ordered_json::array();
  for (const auto& p : r.phases)
    out["phases"].push_back({{"app", r.apps.at(static_cast<size_t>(p.app)).name},
                             {"index", p.index},
                             {"op", p.op == core::Op::Read ? "read" : "write"},
                             {"requested", p.requested},
                             {"granted", p.granted},
                             {"end", p.end},
                             {"buffers", p.buffers},
                             {"size", p.bytes},
                             {"wait", p.granted - p.requested},
                             {"io", p.end - p.granted},
                             {"io_alone", p.io_alone}});
  out["drains"] = ordered_json::array();
  for (const auto& d : r.drains)
    if (d.bytes > 0)
      out["drains"].push_back(
          {{"buffer", d.buffer}, {"start", d.start}, {"end", d.end}, {"bytes", d.bytes}});
  out["prefetches"] = ordered_json::array();
  for (const auto& p : r.prefetches)
    out["prefetches"].push_back({{"app", r.apps.at(static_cast<size_t>(p.app)).name},
                                 {"index", p.index},
                                 {"start", p.start},
                                 {"end", p.end},
                                 {"bytes", p.bytes}});
  out["sim"] = {{"events", r.events}};
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
    out["control"] = {{"messages", messages},
                      {"messages_per_phase",
                       static_cast<double>(messages) / static_cast<double>(r.control.size())},
                      {"heartbeats_at_most", r.heartbeats},
                      {"overhead_p50", at(0.5)},
                      {"overhead_p99", at(0.99)},
                      {"overhead_max", overhead.back()},
                      {"phases", phases}};
  }
  return out;
}

}  // namespace harmonia::sim
