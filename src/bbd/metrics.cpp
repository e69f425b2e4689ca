#include "bbd/metrics.hpp"

#include "common/metrics.hpp"

namespace harmonia::bbd {

std::string render_metrics(const StoreStats& stats, const NodeLoad& load) {
  common::metrics::Exposition out;
  const auto bytes = [](std::uint64_t value) { return static_cast<double>(value); };
  out.gauge("harmonia_bbd_capacity_bytes", "Bytes the node may hold", "bytes",
            bytes(stats.capacity));
  out.gauge("harmonia_bbd_used_bytes",
            "Bytes the node holds: written data not drained yet, and staged-in copies", "bytes",
            bytes(stats.used));
  out.gauge("harmonia_bbd_staged_bytes", "Bytes of staged-in copies of read phases' files", "bytes",
            bytes(stats.staged));
  out.gauge("harmonia_bbd_orphaned_bytes",
            "Bytes recovered whose file the node could not find again (held, never drained)",
            "bytes", bytes(stats.orphaned));
  out.gauge("harmonia_bbd_files", "Files the node holds written data of", "", stats.files);
  out.gauge("harmonia_bbd_draining", "Whether the node is draining to the PFS", "",
            stats.draining ? 1 : 0);
  std::vector<std::pair<std::string, double>> held;
  for (const auto& [job, value] : stats.held_by_job)
    held.emplace_back(job.empty() ? "unnamed" : job, bytes(value));
  out.gauge("harmonia_bbd_held_bytes",
            "Written bytes held per writer's job (the largest jobs; the rest summed as "
            "job=\"other\"; writes that named no job as job=\"unnamed\")",
            "bytes", common::metrics::largest("job", held, kJobsLabelled));
  out.counter("harmonia_bbd_received_bytes", "Bytes clients wrote to the node since it started",
              "bytes", bytes(stats.received));
  out.counter("harmonia_bbd_drained_bytes", "Bytes the node drained to the PFS since it started",
              "bytes", bytes(stats.drained));
  out.counter("harmonia_bbd_staged_read_bytes",
              "Bytes read from staged-in copies since the node started", "bytes",
              bytes(stats.staged_read));
  out.gauge("harmonia_bbd_connections", "Client connections open", "", load.connections);
  out.gauge("harmonia_bbd_requests_in_flight", "Requests being answered", "", load.in_flight);
  out.gauge("harmonia_bbd_start_time_seconds", "When the node started (Unix time)", "seconds",
            load.started_at);
  return out.text();
}

}  // namespace harmonia::bbd
