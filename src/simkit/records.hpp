#pragma once
/// @file The scheduler's recorder (core::Recorder) as results JSON (docs/formats.md section 3),
/// one writer for harmonia-sim and harmonia-schedd's `--record`. No SimGrid.

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/metrics.hpp"

namespace harmonia::simkit {

/// Every system metric, in the documented order.
nlohmann::ordered_json metrics_json(const core::SystemMetrics& metrics);
/// One application's entry.
nlohmann::ordered_json app_json(const core::AppMetrics& app);
/// One phase's entry, its application named `app_name`.
nlohmann::ordered_json phase_json(const core::PhaseRecord& phase, const std::string& app_name);
/// One drain's entry; null for a drain that moved nothing (left out of the results).
nlohmann::ordered_json drain_json(const core::DrainRecord& drain);
/// One stage-in's entry, its application named `app_name`.
nlohmann::ordered_json prefetch_json(const core::PrefetchRecord& prefetch,
                                     const std::string& app_name);
/// One entry per drain that moved bytes.
nlohmann::ordered_json drains_json(const std::vector<core::DrainRecord>& drains);
/// One entry per stage-in of a read phase; `app_name` names the application of a record.
nlohmann::ordered_json prefetches_json(const std::vector<core::PrefetchRecord>& prefetches,
                                       const std::function<std::string(int app)>& app_name);

/// Writes one JSON object to `out` a member at a time, and an array member an element at a
/// time, one element a line: a run's results (hundreds of thousands of jobs and their phases)
/// never exist whole in memory, as a document or as its text.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::ostream& out);
  void member(std::string_view key, const nlohmann::ordered_json& value);
  /// The member `key`: an array of `to_json(item)` for each of `items`, null ones left out.
  template <class Items, class ToJson>
  void array(std::string_view key, const Items& items, ToJson&& to_json) {
    begin_array(key);
    for (const auto& item : items) element(to_json(item));
    end_array();
  }
  /// Ends the object (its closing brace and a newline).
  void finish();

 private:
  void name(std::string_view key);
  void begin_array(std::string_view key);
  void element(const nlohmann::ordered_json& value);
  void end_array();

  std::ostream& out_;
  bool first_member_ = true;
  bool first_element_ = true;
};

}  // namespace harmonia::simkit
