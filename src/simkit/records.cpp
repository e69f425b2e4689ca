#include "simkit/records.hpp"

namespace harmonia::simkit {

using nlohmann::ordered_json;

ordered_json metrics_json(const core::SystemMetrics& s) {
  return {
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
}

ordered_json apps_json(const std::vector<core::AppMetrics>& apps) {
  ordered_json out = ordered_json::array();
  for (const auto& a : apps)
    out.push_back({{"name", a.name},
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
  return out;
}

ordered_json phases_json(const std::vector<core::PhaseRecord>& phases,
                         const std::function<std::string(int app)>& app_name) {
  ordered_json out = ordered_json::array();
  for (const auto& p : phases)
    out.push_back({{"app", app_name(p.app)},
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
  return out;
}

ordered_json prefetches_json(const std::vector<core::PrefetchRecord>& prefetches,
                             const std::function<std::string(int app)>& app_name) {
  ordered_json out = ordered_json::array();
  for (const auto& p : prefetches)
    out.push_back({{"app", app_name(p.app)},
                   {"index", p.index},
                   {"start", p.start},
                   {"end", p.end},
                   {"bytes", p.bytes}});
  return out;
}

ordered_json drains_json(const std::vector<core::DrainRecord>& drains) {
  ordered_json out = ordered_json::array();
  for (const auto& d : drains)
    if (d.bytes > 0)
      out.push_back({{"buffer", d.buffer}, {"start", d.start}, {"end", d.end}, {"bytes", d.bytes}});
  return out;
}

}  // namespace harmonia::simkit
