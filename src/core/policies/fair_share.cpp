// Fair-share (processor-sharing) baseline: every phase starts as soon as it is requested, striped
// over every buffer that can take it, so all phases in progress share the buffers' bandwidth
// equally. No phase ever waits for another (only for space), no limit on co-location: the
// textbook processor-sharing discipline applied to burst buffers, the reference the interference-
// aware policies are measured against.
#include <algorithm>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

class FairShare : public Scheduler {
 public:
  using Scheduler::Scheduler;

 protected:
  void decide(double now) override {
    const auto waiting = pending_;  // grant() removes from pending_
    for (const auto& p : waiting) {
      std::vector<BufferId> all;
      for (BufferId b = 0; b < config_.buffer_count; ++b)
        if (placeable(b, p.request.app)) all.push_back(b);
      if (static_cast<int>(all.size()) < config_.min_buffers) continue;
      const double share = p.request.bytes / static_cast<double>(all.size());
      const bool fits = std::all_of(all.begin(), all.end(), [&](BufferId b) {
        return buffers_[static_cast<size_t>(b)].free() >= share;
      });
      if (fits)
        grant(p.request.app, p.request.index, all, now);
      else
        capacity_blocked_ = true;  // drains run until the phase fits
    }
  }
};

}  // namespace

std::unique_ptr<Scheduler> make_fair_share(SchedulerConfig config, Actions& actions) {
  return std::make_unique<FairShare>(std::move(config), actions);
}

}  // namespace harmonia::core
