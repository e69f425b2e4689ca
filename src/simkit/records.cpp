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

ordered_json app_json(const core::AppMetrics& a) {
  return {{"name", a.name},
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
          {"interference_factor", a.interference_factor}};
}

ordered_json phase_json(const core::PhaseRecord& p, const std::string& app_name) {
  return {{"app", app_name},
          {"index", p.index},
          {"op", p.op == core::Op::Read ? "read" : "write"},
          {"requested", p.requested},
          {"granted", p.granted},
          {"end", p.end},
          {"buffers", p.buffers},
          {"size", p.bytes},
          {"wait", p.granted - p.requested},
          {"io", p.end - p.granted},
          {"io_alone", p.io_alone}};
}

ordered_json drain_json(const core::DrainRecord& d) {
  if (d.bytes <= 0) return nullptr;
  return {{"buffer", d.buffer}, {"start", d.start}, {"end", d.end}, {"bytes", d.bytes}};
}

ordered_json prefetch_json(const core::PrefetchRecord& p, const std::string& app_name) {
  return {{"app", app_name},
          {"index", p.index},
          {"start", p.start},
          {"end", p.end},
          {"bytes", p.bytes}};
}

namespace {

/// The array of `to_json(item)` for each of `items`, null ones left out.
template <class Items, class ToJson>
ordered_json array_of(const Items& items, ToJson&& to_json) {
  ordered_json out = ordered_json::array();
  for (const auto& item : items)
    if (auto value = to_json(item); !value.is_null()) out.push_back(std::move(value));
  return out;
}

}  // namespace

ordered_json prefetches_json(const std::vector<core::PrefetchRecord>& prefetches,
                             const std::function<std::string(int app)>& app_name) {
  return array_of(prefetches,
                  [&](const core::PrefetchRecord& p) { return prefetch_json(p, app_name(p.app)); });
}

ordered_json drains_json(const std::vector<core::DrainRecord>& drains) {
  return array_of(drains, drain_json);
}

ObjectWriter::ObjectWriter(std::ostream& out) : out_(out) { out_ << "{"; }

void ObjectWriter::name(std::string_view key) {
  out_ << (first_member_ ? "\n  " : ",\n  ") << nlohmann::json(std::string(key)).dump() << ": ";
  first_member_ = false;
}

void ObjectWriter::member(std::string_view key, const ordered_json& value) {
  name(key);
  out_ << value.dump();
}

void ObjectWriter::begin_array(std::string_view key) {
  name(key);
  out_ << "[";
  first_element_ = true;
}

void ObjectWriter::element(const ordered_json& value) {
  if (value.is_null()) return;
  out_ << (first_element_ ? "\n    " : ",\n    ") << value.dump();
  first_element_ = false;
}

void ObjectWriter::end_array() { out_ << (first_element_ ? "]" : "\n  ]"); }

void ObjectWriter::finish() { out_ << (first_member_ ? "}\n" : "\n}\n"); }

}  // namespace harmonia::simkit
