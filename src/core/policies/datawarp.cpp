// DataWarp-style baseline (paper IV-B, "DataWarp schedules applications through the central batch
// scheduler"): each job reserves buffer capacity for its whole declared I/O when it is admitted,
// first come first served with head-of-line blocking; its phases are written at once, striped over
// all buffers, with no interference awareness; its data is staged out to the PFS only after the
// job ends, and the reservation is freed when the stage-out completes.
#include <algorithm>
#include <deque>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

class DataWarp : public Scheduler {
 public:
  using Scheduler::Scheduler;

 protected:
  void admit_on_register(AppId app, double now) override {
    queue_.push_back(app);
    admit_from_queue(now);
  }

  bool drain_before_app_end(AppId) const override { return false; }
  // Stage-out is DataWarp's only drain: no threshold, no backup flushers.
  double flush_threshold() const override { return 0.0; }
  int backup_flushers() const override { return 0; }

  void on_app_drained(AppId app, double now) override {
    reserved_ -= reservation(app);
    admit_from_queue(now);
  }

  void decide(double now) override {
    std::vector<BufferId> all(static_cast<size_t>(config_.buffer_count));
    for (BufferId b = 0; b < config_.buffer_count; ++b) all[static_cast<size_t>(b)] = b;
    // Copy: grant() removes from pending_.
    const auto waiting = pending_;
    for (const auto& p : waiting) {
      const double share = p.request.bytes / config_.buffer_count;
      const bool fits = std::all_of(buffers_.begin(), buffers_.end(),
                                    [&](const BufferState& b) { return b.free() >= share; });
      if (fits) grant(p.request.app, p.request.index, all, now);
    }
  }

 private:
  double total_capacity() const { return config_.buffer_capacity * config_.buffer_count; }
  double reservation(AppId app) const {
    return std::min(apps_[static_cast<size_t>(app)].info.declared_bytes, total_capacity());
  }

  void admit_from_queue(double now) {
    while (!queue_.empty() && reserved_ + reservation(queue_.front()) <= total_capacity()) {
      const AppId app = queue_.front();
      queue_.pop_front();
      reserved_ += reservation(app);
      admit(app, now);
    }
  }

  std::deque<AppId> queue_;
  double reserved_ = 0;
};

}  // namespace

std::unique_ptr<Scheduler> make_datawarp(SchedulerConfig config, Actions& actions) {
  return std::make_unique<DataWarp>(std::move(config), actions);
}

}  // namespace harmonia::core
