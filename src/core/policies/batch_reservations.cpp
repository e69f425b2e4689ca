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

std::vector<Release> expected_releases(const CapacityHoldings& holdings, double now,
                                       const std::function<int(AppId)>& nodes_held) {
  std::vector<Release> releases;
  for (const auto& [app, h] : holdings.held())
    releases.push_back({h.bytes, nodes_held(app), std::max(now, h.expected_end)});
  std::sort(releases.begin(), releases.end(),
            [](const Release& a, const Release& b) { return a.at < b.at; });
  return releases;
}

}  // namespace harmonia::core
