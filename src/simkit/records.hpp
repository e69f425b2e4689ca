#pragma once
/// @file The scheduler's recorder (core::Recorder) as results JSON (docs/formats.md section 3),
/// one writer for harmonia-sim and harmonia-schedd's `--record`. No SimGrid.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/metrics.hpp"

namespace harmonia::simkit {

/// Every system metric, in the documented order.
nlohmann::ordered_json metrics_json(const core::SystemMetrics& metrics);
/// One entry per application.
nlohmann::ordered_json apps_json(const std::vector<core::AppMetrics>& apps);
/// One entry per phase; `app_name` names the application of a record.
nlohmann::ordered_json phases_json(const std::vector<core::PhaseRecord>& phases,
                                   const std::function<std::string(int app)>& app_name);
/// One entry per drain that moved bytes.
nlohmann::ordered_json drains_json(const std::vector<core::DrainRecord>& drains);
/// One entry per stage-in of a read phase; `app_name` names the application of a record.
nlohmann::ordered_json prefetches_json(const std::vector<core::PrefetchRecord>& prefetches,
                                       const std::function<std::string(int app)>& app_name);

}  // namespace harmonia::simkit
