#pragma once
/// @file Results JSON (docs/formats.md section 3).

#include <nlohmann/json.hpp>
#include <string>

#include "sim/simulation.hpp"

namespace harmonia::sim {

nlohmann::ordered_json results_json(const Scenario& scenario, const std::string& policy,
                                    const RunResult& result);

}  // namespace harmonia::sim
