// Slurm's burst-buffer reservation with EASY backfilling. A job asks for burst-buffer capacity
// (its declared I/O) and a time limit; jobs start in submission order, each holding its capacity
// from start until its data is staged out (Slurm burst_buffer plugins: stage-in, run, stage-out,
// then teardown frees the space). When the first job in line does not fit, it gets a reservation:
// the earliest time enough capacity frees up, assuming every running job ends at its time limit
// (the shadow time), and the capacity left over at that time beyond its need (the extra). A later
// job may start now (backfill) if it fits now and either ends, by its time limit, before the
// shadow time or uses no more than the extra (Lifka's EASY; Mu'alem and Feitelson, IEEE TPDS
// 2001). A job without a time limit is taken to run forever.
//
// Inside a job, I/O is as under DataWarp: each phase is written at once over every buffer, with
// no interference awareness, and its data is staged out after the job ends.
#include <algorithm>
#include <deque>
#include <limits>
#include <map>

#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class SlurmEasy : public Scheduler {
 public:
  using Scheduler::Scheduler;

 protected:
  void admit_on_register(AppId app, double now) override {
    queue_.push_back(app);
    schedule(now);
  }

  bool drain_before_app_end(AppId) const override { return false; }
  double flush_threshold() const override { return 0.0; }
  int backup_flushers() const override { return 0; }
  // A job's input is staged in before it starts and stays in its reservation until it ends.
  bool stages_in_before_start() const override { return true; }

  void on_app_drained(AppId app, double now) override {
    holding_.erase(app);
    schedule(now);
  }

  void decide(double now) override {
    std::vector<BufferId> all(static_cast<size_t>(config_.buffer_count));
    for (BufferId b = 0; b < config_.buffer_count; ++b) all[static_cast<size_t>(b)] = b;
    const auto waiting = pending_;  // grant() removes from pending_
    for (const auto& p : waiting) {
      const double share = p.request.bytes / config_.buffer_count;
      if (std::all_of(buffers_.begin(), buffers_.end(),
                      [&](const BufferState& b) { return b.free() >= share; }))
        grant(p.request.app, p.request.index, all, now);
    }
  }

 private:
  struct Holding {
    double bytes = 0;
    double expected_end = kNever;
  };

  double total_capacity() const { return config_.buffer_capacity * config_.buffer_count; }
  double request_of(AppId app) const {
    return std::min(apps_[static_cast<size_t>(app)].info.declared_bytes, total_capacity());
  }
  double walltime_of(AppId app) const {
    const double w = apps_[static_cast<size_t>(app)].info.walltime;
    return w > 0 ? w : kNever;
  }
  double free_now() const {
    double held = 0;
    for (const auto& [app, h] : holding_) held += h.bytes;
    return total_capacity() - held;
  }

  void start(AppId app, double now) {
    holding_[app] = {request_of(app), now + walltime_of(app)};
    admit(app, now);
  }

  void schedule(double now) {
    while (!queue_.empty() && request_of(queue_.front()) <= free_now()) {
      const AppId app = queue_.front();
      queue_.pop_front();
      start(app, now);
    }
    if (queue_.size() < 2) return;
    // The head's reservation: when running jobs, ending at their limits, free enough for it.
    const double need = request_of(queue_.front());
    std::vector<Holding> ending;
    for (const auto& [app, h] : holding_)
      ending.push_back({h.bytes, std::max(now, h.expected_end)});
    std::sort(ending.begin(), ending.end(),
              [](const Holding& a, const Holding& b) { return a.expected_end < b.expected_end; });
    double available = free_now();
    double shadow = now;
    for (const auto& h : ending) {
      if (available >= need) break;
      available += h.bytes;
      shadow = h.expected_end;
    }
    double extra = available - need;
    for (auto it = std::next(queue_.begin()); it != queue_.end();) {
      const AppId app = *it;
      const double bytes = request_of(app);
      const bool fits = bytes <= free_now();
      const bool done_before_shadow = walltime_of(app) < kNever && now + walltime_of(app) <= shadow;
      if (fits && (done_before_shadow || bytes <= extra)) {
        if (!done_before_shadow) extra -= bytes;
        it = queue_.erase(it);
        start(app, now);
      } else {
        ++it;
      }
    }
  }

  std::deque<AppId> queue_;
  std::map<AppId, Holding> holding_;  ///< started jobs whose capacity is not yet released
};

}  // namespace

std::unique_ptr<Scheduler> make_slurm_easy(SchedulerConfig config, Actions& actions) {
  return std::make_unique<SlurmEasy>(std::move(config), actions);
}

}  // namespace harmonia::core
