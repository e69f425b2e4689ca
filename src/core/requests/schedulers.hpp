#pragma once
/// @file Factories of the request schedulers, one per file in this folder; the registry
/// (core/requests/registry.hpp) maps names to them. Each reads its own options and throws
/// std::invalid_argument naming a bad or unknown one.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/requests/options.hpp"
#include "core/requests/request_scheduler.hpp"

namespace harmonia::core::requests {

std::unique_ptr<RequestScheduler> make_fifo(const Options& options);
std::unique_ptr<RequestScheduler> make_to(const Options& options);
std::unique_ptr<RequestScheduler> make_to_agg(const Options& options);
std::unique_ptr<RequestScheduler> make_hbrr(const Options& options);
std::unique_ptr<RequestScheduler> make_sjf(const Options& options);
std::unique_ptr<RequestScheduler> make_mlf(const Options& options);
std::unique_ptr<RequestScheduler> make_aioli(const Options& options);
std::unique_ptr<RequestScheduler> make_sw(const Options& options);
std::unique_ptr<RequestScheduler> make_twins(const Options& options);

/// Time order, shared by `to` (no aggregation) and `to-agg`.
std::unique_ptr<RequestScheduler> make_time_order(std::string name, AggregationLimits limits);

/// TWINS: the order in which forwarding node `node` visits the `servers` data servers, one per
/// window (the node's permutation of the server list; docs/request-schedulers.md).
std::vector<ServerId> twins_permutation(int node, int servers);
/// The server forwarding node `node` serves during window `window` (time / window length).
ServerId twins_server(int node, int servers, std::uint64_t window);

}  // namespace harmonia::core::requests
