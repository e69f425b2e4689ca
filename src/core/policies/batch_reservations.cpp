#include "core/policies/batch_reservations.hpp"

#include <algorithm>

namespace harmonia::core {

double capacity_request(const AppState& app, double total_capacity) {
  return std::min(app.info.declared_bytes, total_capacity);
}

double time_limit(const AppState& app) {
  return app.info.walltime > 0 ? app.info.walltime : kNoLimit;
}

double CapacityHoldings::free() const {
  double held = 0;
  for (const auto& [app, h] : held_) held += h.bytes;
  return total_ - held + kByteEpsilon;
}

BatchReservationPolicy::BatchReservationPolicy(SchedulerConfig config, Actions& actions)
    : Scheduler(std::move(config), actions),
      holdings_(config_.buffer_capacity * config_.buffer_count) {}

void BatchReservationPolicy::admit_on_register(AppId app, double now) {
  queue_.push_back(app);
  schedule(now);
}

void BatchReservationPolicy::on_app_drained(AppId app, double now) {
  holdings_.release(app);
  schedule(now);
}

void BatchReservationPolicy::start(AppId app, double now) {
  queue_.erase(std::find(queue_.begin(), queue_.end(), app));
  holdings_.hold(app, request_of(app), now + walltime_of(app));
  admit(app, now);
}

double BatchReservationPolicy::request_of(AppId app) const {
  return capacity_request(apps_[static_cast<size_t>(app)], holdings_.total());
}

double BatchReservationPolicy::walltime_of(AppId app) const {
  return time_limit(apps_[static_cast<size_t>(app)]);
}

std::vector<Release> BatchReservationPolicy::releases(double now) const {
  std::vector<Release> out;
  for (const auto& [app, h] : holdings_.held())
    out.push_back({h.bytes, apps_[static_cast<size_t>(app)].ended ? 0 : nodes_needed(app),
                   std::max(now, h.expected_end)});
  std::sort(out.begin(), out.end(), [](const Release& a, const Release& b) { return a.at < b.at; });
  return out;
}

}  // namespace harmonia::core
