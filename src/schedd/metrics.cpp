#include "schedd/metrics.hpp"

#include <array>
#include <map>

namespace harmonia::schedd {

namespace {

using common::metrics::Labels;
using Samples = std::vector<std::pair<Labels, double>>;

/// A job's state, one of kJobStates: what it waits for, if anything.
const char* job_state(const control::JobStatus& job) {
  if (job.directive().await_grant()) return "waiting_grant";
  if (job.wants_flush() > 0 && !job.directive().flush_allowed()) return "waiting_flush";
  if (job.in_phase() > 0) return "in_phase";
  return "idle";
}
constexpr std::array<const char*, 4> kJobStates = {"idle", "in_phase", "waiting_flush",
                                                   "waiting_grant"};

}  // namespace

std::string render_metrics(const control::Status& status, const SchedulerMeters& meters) {
  common::metrics::Exposition out;
  std::map<std::string, double> by_state;
  for (const char* state : kJobStates) by_state[state] = 0;
  double processes = 0;
  std::vector<std::pair<std::string, double>> waits;
  for (const auto& job : status.jobs()) {
    ++by_state[job_state(job)];
    processes += job.processes();
    waits.emplace_back(job.job(), job.wait_seconds());
  }
  Samples jobs;
  for (const auto& [state, count] : by_state) jobs.push_back({{{"state", state}}, count});
  out.gauge("harmonia_schedd_jobs", "Jobs registered, by what they wait for", "", jobs);
  out.gauge("harmonia_schedd_processes", "Processes of registered jobs connected", "", processes);
  out.gauge("harmonia_schedd_connections", "Connections open (processes, nodes, tools)", "",
            status.connections());
  out.counter("harmonia_schedd_requests", "Requests handled since start", "",
              static_cast<double>(status.requests()));
  out.counter("harmonia_schedd_pushes", "Messages sent that answer no request", "",
              static_cast<double>(status.pushes()));
  out.gauge("harmonia_schedd_start_time_seconds", "When the daemon started (Unix time)", "seconds",
            meters.started_at);
  if (!status.policy().empty()) {
    out.gauge("harmonia_schedd_job_wait_seconds",
              "Seconds a job's phases waited for buffer grants so far (the largest jobs; the "
              "rest summed as job=\"other\")",
              "seconds", common::metrics::largest("job", waits, kJobsLabelled));
    Samples connected, capacity, used, scheduled, phases, draining, drained, late;
    for (const auto& node : status.buffers()) {
      const Labels labels = {{"node", std::to_string(node.index())}, {"address", node.address()}};
      connected.push_back({labels, node.connected() ? 1 : 0});
      capacity.push_back({labels, static_cast<double>(node.capacity())});
      used.push_back({labels, static_cast<double>(node.used())});
      scheduled.push_back({labels, node.scheduled_used()});
      phases.push_back({labels, node.phases()});
      draining.push_back({labels, node.draining() ? 1 : 0});
      drained.push_back({labels, static_cast<double>(node.drained_bytes())});
      late.push_back({labels, static_cast<double>(node.stage_ins_late())});
    }
    out.gauge("harmonia_schedd_buffer_connected", "Whether the buffer node is registered", "",
              connected);
    out.gauge("harmonia_schedd_buffer_capacity_bytes", "A buffer node's capacity", "bytes",
              capacity);
    out.gauge("harmonia_schedd_buffer_used_bytes", "Bytes a buffer node holds, as it reports",
              "bytes", used);
    out.gauge("harmonia_schedd_buffer_scheduled_bytes",
              "Bytes the policy accounts on a buffer node (granted and not drained)", "bytes",
              scheduled);
    out.gauge("harmonia_schedd_buffer_phases", "I/O phases running on a buffer node", "", phases);
    out.gauge("harmonia_schedd_buffer_draining", "Whether the policy has a buffer node drain", "",
              draining);
    out.counter("harmonia_schedd_buffer_drained_bytes",
                "Bytes a buffer node drained to the PFS since it started, as it reports", "bytes",
                drained);
    out.counter("harmonia_schedd_buffer_stage_ins_late",
                "A buffer node's parts of stage-ins given up at their deadline", "", late);
  }
  out.histogram("harmonia_schedd_phase_wait_seconds",
                "Seconds each buffer phase waited for its grant", "seconds",
                meters.phase_wait.snapshot());
  out.histogram("harmonia_schedd_decision_seconds",
                "Seconds the daemon took to handle one request, the policy's decision included",
                "seconds", meters.decision.snapshot());
  return out.text();
}

}  // namespace harmonia::schedd
