#pragma once
/// @file Factories of the coordination strategies, one file each; `registry.cpp` names them.

#include <memory>

#include "core/coordination/coordinator.hpp"

namespace harmonia::core::coordination {

std::unique_ptr<Coordinator> make_no_coordination(CoordinatorConfig config);
/// 1a/1b (`newest_first`) and 2a/2b; "b" variants flush on request.
std::unique_ptr<Coordinator> make_staging_order(CoordinatorConfig config, bool newest_first,
                                                bool flush_on_request);
/// 3a (static) and 3b (`dynamic`).
std::unique_ptr<Coordinator> make_partitioning(CoordinatorConfig config, bool dynamic);
/// "throttle": later comers leave `throttle_gap` between writes while several jobs write.
std::unique_ptr<Coordinator> make_throttle(CoordinatorConfig config);

}  // namespace harmonia::core::coordination
