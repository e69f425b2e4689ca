#pragma once
/// @file Helpers the peer policies share: splitting the buffers among claimants in proportion to
/// their weights, and the buffers no phase runs on.

#include <vector>

#include "core/scheduler.hpp"

namespace harmonia::core {

/// Splits `total` buffers among claimants: `minimum` each first (when all fit), the rest in
/// proportion to `weights` (largest remainders, ties to the earlier claimant). When there are more
/// claimants than `total / minimum`, each share is `minimum` and they add up to more than `total`:
/// callers grant only what is free.
std::vector<int> apportion(const std::vector<double>& weights, int total, int minimum);

/// Buffers with no phase running that a new phase of `app` may use, emptiest first.
std::vector<BufferId> idle_buffers(const std::vector<BufferState>& buffers,
                                   const std::vector<bool>& placeable);

/// Whether `bytes` striped evenly over `chosen` fits in their free space.
bool fits_on(const std::vector<BufferState>& buffers, const std::vector<BufferId>& chosen,
             double bytes);

}  // namespace harmonia::core
