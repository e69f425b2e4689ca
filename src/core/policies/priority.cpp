// Harmonia "Application Priority" (paper IV-B2): phases run in priority order, exclusively on their
// buffers (no co-located phase, drains yield to I/O). A lower-priority phase starts only while no
// higher-priority phase waits; running phases are never interrupted. Equal priorities either share
// the free buffers equally (default) or go one at a time, first come first served. The paper gives
// this policy no cost function, so it is a rule, not a DP objective.
#include <algorithm>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

class PriorityPolicy : public Scheduler {
 public:
  using Scheduler::Scheduler;

 protected:
  DrainMode drain_mode() const override { return DrainMode::YieldToIO; }

  void decide(double now) override {
    if (pending_.empty()) return;
    int top = pending_.front().request.priority;
    for (const auto& p : pending_) top = std::max(top, p.request.priority);
    std::vector<PendingPhase> level;
    for (const auto& p : pending_)
      if (p.request.priority == top) level.push_back(p);
    std::stable_sort(level.begin(), level.end(), [](const auto& a, const auto& b) {
      return std::tie(a.requested, a.request.app) < std::tie(b.requested, b.request.app);
    });
    // A buffer holding an application's cached data takes only its phases (IV-B), and serves no
    // one else until it ends: the first such application of the level goes first, alone, on its
    // buffers and the free ones (otherwise it could wait behind phases its data keeps out).
    const auto owner = std::find_if(level.begin(), level.end(), [&](const PendingPhase& p) {
      return holds_cached(p.request.app);
    });
    const AppId usable_by = owner == level.end() ? -1 : owner->request.app;
    if (usable_by >= 0)
      level.erase(std::remove_if(level.begin(), level.end(),
                                 [&](const PendingPhase& p) { return p.request.app != usable_by; }),
                  level.end());

    std::vector<BufferId> free;
    for (BufferId b = 0; b < config_.buffer_count; ++b)
      if (buffers_[static_cast<size_t>(b)].phases == 0 && placeable(b, usable_by))
        free.push_back(b);
    std::sort(free.begin(), free.end(), [&](BufferId a, BufferId b) {
      return buffers_[static_cast<size_t>(a)].used < buffers_[static_cast<size_t>(b)].used;
    });

    const int y = config_.min_buffers;
    const int total = static_cast<int>(free.size());
    if (total < y) return;
    const int sharing = config_.priority_tie == PriorityTie::Share
                            ? std::min(static_cast<int>(level.size()), total / y)
                            : 1;
    const int each = std::min(total / sharing, config_.phase_buffer_bound());
    size_t next = 0;
    for (int k = 0; k < sharing; ++k) {
      const auto& p = level[static_cast<size_t>(k)];
      std::vector<BufferId> bufs(free.begin() + static_cast<long>(next),
                                 free.begin() + static_cast<long>(next) + each);
      const double share = p.request.bytes / each;
      const bool fits = std::all_of(bufs.begin(), bufs.end(), [&](BufferId b) {
        return buffers_[static_cast<size_t>(b)].free() >= share;
      });
      if (!fits) {  // wait for drains rather than let a lower-ranked phase jump ahead
        capacity_blocked_ = true;
        break;
      }
      std::sort(bufs.begin(), bufs.end());
      grant(p.request.app, p.request.index, bufs, now);
      next += static_cast<size_t>(each);
    }
  }
};

}  // namespace

std::unique_ptr<Scheduler> make_priority(SchedulerConfig config, Actions& actions) {
  return std::make_unique<PriorityPolicy>(std::move(config), actions);
}

}  // namespace harmonia::core
