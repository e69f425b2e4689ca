#pragma once
/// @file harmonia-schedd's metrics (docs/deploy.md, "Metrics"): its Status as OpenMetrics
/// families, and the histograms the daemon fills as it runs.

#include <string>

#include "common/metrics.hpp"
#include "control/control.pb.h"

namespace harmonia::schedd {

/// What the scheduler measures as it runs, beyond its Status.
struct SchedulerMeters {
  /// Seconds each buffer phase waited for its grant.
  common::metrics::Histogram phase_wait{common::metrics::seconds_buckets()};
  /// Seconds the daemon took to handle one request, the policy's decision included.
  common::metrics::Histogram decision{common::metrics::seconds_buckets()};
  double started_at = 0;  ///< Unix time
};

/// Jobs with a label of their own in per-job families (the rest are summed as "other").
inline constexpr std::size_t kJobsLabelled = 20;

/// The scrape of a daemon whose state is `status`.
std::string render_metrics(const control::Status& status, const SchedulerMeters& meters);

}  // namespace harmonia::schedd
