#pragma once
/// @file Request schedulers by name.

#include <memory>
#include <string>
#include <vector>

#include "core/requests/options.hpp"
#include "core/requests/request_scheduler.hpp"

namespace harmonia::core::requests {

/// Names of every registered request scheduler, the pass-through baseline (`fifo`) first.
std::vector<std::string> request_scheduler_names();

/// A new request scheduler running algorithm `name` with `options`. Throws std::invalid_argument
/// for an unknown name, an option without a registered algorithm's prefix, or an unknown or bad
/// option of `name`. Options of other registered algorithms are ignored, so that one map can hold
/// the settings of every algorithm.
std::unique_ptr<RequestScheduler> make_request_scheduler(const std::string& name,
                                                         const Options& options = {});

/// The options algorithm `name` reads, with their defaults and ranges; throws
/// std::invalid_argument for an unknown name.
std::vector<OptionSpec> request_scheduler_options(const std::string& name);

}  // namespace harmonia::core::requests
