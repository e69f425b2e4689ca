#pragma once
/// @file Factories of the request schedulers, one per file in this folder; the registry
/// (core/requests/registry.hpp) maps names to them. Each reads its own options through the
/// reader the registry gives it (which throws std::invalid_argument naming a bad one, and then
/// any unknown one), so that the same code also lists the options for `harmonia-describe`.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/requests/options.hpp"
#include "core/requests/request_scheduler.hpp"

namespace harmonia::core::requests {

std::unique_ptr<RequestScheduler> make_fifo(OptionReader& options);
std::unique_ptr<RequestScheduler> make_to(OptionReader& options);
std::unique_ptr<RequestScheduler> make_to_agg(OptionReader& options);
std::unique_ptr<RequestScheduler> make_hbrr(OptionReader& options);
std::unique_ptr<RequestScheduler> make_sjf(OptionReader& options);
std::unique_ptr<RequestScheduler> make_mlf(OptionReader& options);
std::unique_ptr<RequestScheduler> make_aioli(OptionReader& options);
std::unique_ptr<RequestScheduler> make_sw(OptionReader& options);
std::unique_ptr<RequestScheduler> make_twins(OptionReader& options);

/// Time order, shared by `to` (no aggregation) and `to-agg`.
std::unique_ptr<RequestScheduler> make_time_order(std::string name, AggregationLimits limits);

/// TWINS: the order in which forwarding node `node` visits the `servers` data servers, one per
/// window (the node's permutation of the server list; docs/request-schedulers.md).
std::vector<ServerId> twins_permutation(int node, int servers);
/// The server forwarding node `node` serves during window `window` (time / window length).
ServerId twins_server(int node, int servers, std::uint64_t window);

}  // namespace harmonia::core::requests
