#pragma once
/// @file The forwarding layer on SimGrid (docs/forwarding-simulation.md): clients send their
/// requests to a forwarding node, which orders and aggregates them with a request scheduler of
/// src/core/requests and issues them to the data servers; or, without forwarding, clients talk to
/// the servers themselves. Data servers' disks share their bandwidth NONLINEARly among concurrent
/// requests and lose efficiency on small ones.

#include <nlohmann/json.hpp>

#include "fwdsim/model.hpp"

namespace harmonia::fwdsim {

/// Runs `config` in this process's SimGrid engine (simkit::Engine, made first; once per process)
/// and returns the results JSON (docs/forwarding-simulation.md), deterministic; `wall` gets the
/// run's wall time.
nlohmann::ordered_json simulate(const Config& config, double& wall);

}  // namespace harmonia::fwdsim
