#pragma once
/// @file harmonia-bbd's metrics (docs/deploy.md, "Metrics"): its store's state and the load
/// on its connections, as OpenMetrics families.

#include <string>

#include "bbd/store.hpp"

namespace harmonia::bbd {

/// What a node is doing besides its store.
struct NodeLoad {
  unsigned connections = 0;  ///< client connections open
  unsigned in_flight = 0;    ///< requests being answered
  double started_at = 0;     ///< Unix time
};

/// Jobs with a label of their own in per-job families (the rest are summed as "other").
inline constexpr std::size_t kJobsLabelled = 20;

/// The scrape of a node whose store reports `stats`.
std::string render_metrics(const StoreStats& stats, const NodeLoad& load);

}  // namespace harmonia::bbd
