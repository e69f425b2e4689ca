// DataWarp-style baseline (paper IV-B, "DataWarp schedules applications through the central batch
// scheduler"): each job reserves buffer capacity for its whole declared I/O when it is admitted,
// first come first served with head-of-line blocking (on a machine the jobs share, the first in
// line also waits for its nodes); its phases are written at once, striped over
// all buffers, with no interference awareness; its data is staged out to the PFS only after the
// job ends, and the reservation is freed when the stage-out completes.
//
// Two options answer the paper's challenges (section II):
// - (c) `extend_reservations`: a phase that takes its job past its reservation is granted a
//   temporary extension out of unreserved capacity, accounted like a reservation (no queued job is
//   admitted on it) and freed with the reservation at stage-out. Without free capacity the phase
//   waits, and the queue admits nobody until it is served, instead of the job failing.
// - (d) `lend_write_only`: data of a write-only reservation is never read back by its job, so it is
//   staged out as soon as its phase completes, and the reserved space it does not hold can be lent:
//   a queued job is admitted when the overcommitment (reserved minus total capacity) stays within
//   the write-only reservations' unused space. A lender's phases are granted before a borrower's,
//   which is how lent space is reclaimed.
#include <algorithm>
#include <deque>
#include <map>
#include <set>

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

  bool drain_before_app_end(AppId app) const override { return lends(app); }
  // Stage-out is DataWarp's only drain: no threshold, no backup flushers.
  double flush_threshold() const override { return 0.0; }
  int backup_flushers() const override { return 0; }
  // A job's input is staged in before it starts and stays in its reservation until it ends.
  bool stages_in_before_start() const override { return true; }

  void on_nodes_freed(double now) override { admit_from_queue(now); }

  void on_app_drained(AppId app, double now) override {
    reserving_.erase(app);
    reserved_ -= reservation(app) + extension(app);
    extension_.erase(app);
    borrowers_.erase(app);
    admit_from_queue(now);
  }

  void decide(double now) override {
    std::vector<BufferId> all(static_cast<size_t>(config_.buffer_count));
    for (BufferId b = 0; b < config_.buffer_count; ++b) all[static_cast<size_t>(b)] = b;
    // Copy: grant() removes from pending_. Lenders before borrowers (reclaiming lent space); the
    // order is otherwise FCFS, as without lending.
    auto waiting = pending_;
    std::stable_partition(waiting.begin(), waiting.end(), [&](const PendingPhase& p) {
      return borrowers_.count(p.request.app) == 0;
    });
    extension_waiting_ = false;
    std::vector<PendingPhase> wait_for_extension;
    for (const auto& p : waiting) {
      const AppId app = p.request.app;
      const double share = p.request.bytes / config_.buffer_count;
      const bool fits = std::all_of(buffers_.begin(), buffers_.end(),
                                    [&](const BufferState& b) { return b.free() >= share; });
      const double overflow = granted_[app] + p.request.bytes - reservation(app) - extension(app);
      const bool needs_extension = config_.extend_reservations && overflow > kByteEpsilon;
      if (needs_extension && total_capacity() - reserved_ < overflow - kByteEpsilon) {
        extension_waiting_ = true;
        if (fits) wait_for_extension.push_back(p);
        continue;
      }
      if (!fits) continue;
      if (needs_extension) {
        reserved_ += overflow;
        extension_[app] += overflow;
      }
      granted_[app] += p.request.bytes;
      grant(app, p.request.index, all, now);
    }
    // Every admitted job waiting, one of them for an extension, with nothing running or draining
    // that could free capacity, would wait forever: the oldest extension is then granted on the
    // free space of the buffers, overcommitting the reservations (the queue stays closed until they
    // are back under the capacity).
    const bool idle = running_.empty() && all_running_jobs_wait() &&
                      std::none_of(buffers_.begin(), buffers_.end(), [](const BufferState& b) {
                        return b.drainable() > kByteEpsilon;
                      });
    if (idle && !wait_for_extension.empty()) {
      const auto& p = wait_for_extension.front();
      const AppId app = p.request.app;
      const double overflow = granted_[app] + p.request.bytes - reservation(app) - extension(app);
      reserved_ += overflow;
      extension_[app] += overflow;
      granted_[app] += p.request.bytes;
      grant(app, p.request.index, all, now);
    }
    // Capacity freed by a stage-out while an extension waited was kept for it; now that the
    // extensions are served, the queue may have it.
    if (!extension_waiting_) admit_from_queue(now);
  }

 private:
  double total_capacity() const { return config_.buffer_capacity * config_.buffer_count; }
  const AppState& state(AppId app) const { return apps_[static_cast<size_t>(app)]; }
  double reservation(AppId app) const {
    return std::min(state(app).info.declared_bytes, total_capacity());
  }
  double extension(AppId app) const {
    const auto it = extension_.find(app);
    return it == extension_.end() ? 0.0 : it->second;
  }
  /// Every admitted job that has not ended waits for a phase (none is computing).
  bool all_running_jobs_wait() const {
    std::set<AppId> waiting;
    for (const auto& p : pending_) waiting.insert(p.request.app);
    return std::all_of(running_apps().begin(), running_apps().end(),
                       [&](AppId a) { return waiting.count(a) > 0; });
  }
  bool lends(AppId app) const { return config_.lend_write_only && state(app).info.write_only; }

  /// Reserved space of admitted write-only reservations that their data does not occupy.
  double lendable() const {
    double total = 0;
    for (AppId a : reserving_)
      if (lends(a)) total += std::max(0.0, reservation(a) + extension(a) - state(a).held_bytes);
    return total;
  }

  void admit_from_queue(double now) {
    // A running job waiting for its extension goes before any queued job.
    if (extension_waiting_) return;
    while (!queue_.empty()) {
      const AppId app = queue_.front();
      if (nodes_needed(app) > free_nodes()) break;
      const double after = reserved_ + reservation(app);
      const bool free = after <= total_capacity() + kByteEpsilon;
      const bool borrowed =
          !free && config_.lend_write_only && after - total_capacity() <= lendable() + kByteEpsilon;
      if (!free && !borrowed) break;
      queue_.pop_front();
      reserved_ = after;
      if (borrowed) borrowers_.insert(app);
      reserving_.insert(app);
      admit(app, now);
    }
  }

  std::deque<AppId> queue_;
  double reserved_ = 0;  ///< reservations and extensions of admitted jobs not yet staged out
  std::map<AppId, double> granted_;    ///< bytes of the job's phases granted so far
  std::map<AppId, double> extension_;  ///< temporary extensions (c), freed at stage-out
  std::set<AppId> borrowers_;          ///< jobs admitted on lent write-only space (d)
  std::set<AppId> reserving_;          ///< admitted jobs whose reservation is not freed yet
  bool extension_waiting_ = false;     ///< a phase waits for an extension: the queue waits too
};

}  // namespace

std::unique_ptr<Scheduler> make_datawarp(SchedulerConfig config, Actions& actions) {
  return std::make_unique<DataWarp>(std::move(config), actions);
}

}  // namespace harmonia::core
