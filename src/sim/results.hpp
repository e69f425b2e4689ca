#pragma once
/// @file Results JSON (docs/formats.md section 3).

#include <ostream>
#include <string>

#include "sim/simulation.hpp"

namespace harmonia::sim {

/// Writes the results of `policy` on `scenario` to `out`, a record at a time.
void write_results(std::ostream& out, const Scenario& scenario, const std::string& policy,
                   const RunResult& result);

}  // namespace harmonia::sim
