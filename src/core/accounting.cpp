#include "core/accounting.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace harmonia::core {

std::vector<AccountingRecord> accounting_records(const Scheduler& scheduler,
                                                 const PricingConfig& pricing, double now,
                                                 double clock_origin) {
  const auto& apps = scheduler.apps();
  const auto& recorded = scheduler.recorder();
  const auto metrics = recorded.app_metrics();
  std::vector<AccountingRecord> out;
  for (size_t a = 0; a < apps.size(); ++a) {
    const AppState& app = apps[a];
    const AppMetrics& m = metrics[a];
    AccountingRecord r;
    r.job_id = std::to_string(a + 1);
    r.job_name = app.info.name;
    r.user = app.info.user.empty() ? app.info.name : app.info.user;
    r.account = r.user;
    r.qos = app.info.io_qos;
    r.submit = m.arrival + clock_origin;
    r.state = app.ended ? "COMPLETED" : app.admitted ? "RUNNING" : "PENDING";
    r.nnodes = app.info.nodes;
    r.ncpus = app.info.nodes;
    if (app.admitted) {
      r.start = m.start + clock_origin;
      r.elapsed = std::max(0.0, (app.ended ? m.end : now) - m.start);
    }
    if (app.ended) r.end = m.end + clock_origin;

    double phase_wait = 0, io_alone = 0, interference = 0;
    for (size_t at : recorded.phases_of(static_cast<int>(a))) {
      const auto& p = recorded.phases()[at];
      if (p.end < 0) continue;
      (p.op == Op::Read ? r.bytes_read : r.bytes_written) += p.bytes;
      const double io = p.end - p.granted;
      r.io_time += io;
      phase_wait += p.granted - p.requested;
      io_alone += p.io_alone;
      interference += std::max(0.0, io - p.io_alone);
    }
    r.stall_time =
        (app.admitted ? m.start - m.arrival : now - m.arrival) + phase_wait + interference;

    const IoClass io_class = pricing.resolve(app.info.io_qos);
    const Charge c =
        charge({app.info.nodes, r.elapsed, phase_wait + r.io_time, io_alone}, io_class, pricing);
    r.slowdown = c.slowdown;
    r.promised_slowdown = io_class.slowdown;
    r.billed_node_hours = c.billed_hours;
    r.refunded_seconds = c.refunded;
    r.usage_factor = io_class.usage_factor;
    r.charge = c.amount;
    r.bound_broken = c.bound_broken;
    out.push_back(std::move(r));
  }
  return out;
}

std::string format_elapsed(double seconds) {
  auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  const long long days = total / 86400;
  total %= 86400;
  char buf[48];
  if (days > 0)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", days, total / 3600,
                  total % 3600 / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", total / 3600, total % 3600 / 60,
                  total % 60);
  return buf;
}

}  // namespace harmonia::core
