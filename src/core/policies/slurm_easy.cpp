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
// On a machine the jobs share, compute nodes are a second resource of the same reservation: a
// job starts when both its nodes and its capacity are free, the shadow time is when both suffice
// for the first in line, and a backfilled job that runs past it must fit in the extra of both.
// Nodes are held until the job ends, capacity until its stage-out ends.
//
// `slurm-easy-sjf` backfills the shortest jobs (by time limit) first instead of in submission
// order: the burst-buffer-aware SJF-EASY of Kopanski and Rzadca (Euro-Par 2021), which their
// plan-based scheduler is measured against. Jobs still start in submission order while they fit.
//
// Inside a job, I/O is as under DataWarp: each phase is written at once over every buffer, with
// no interference awareness, and its data is staged out after the job ends.
#include <algorithm>
#include <deque>

#include "core/policies/batch_reservations.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

enum class BackfillOrder { Submission, ShortestFirst };

class SlurmEasy : public BatchReservationPolicy {
 public:
  SlurmEasy(SchedulerConfig config, Actions& actions, BackfillOrder order)
      : BatchReservationPolicy(std::move(config), actions), order_(order) {}

 private:
  bool fits_now(AppId app) const {
    return request_of(app) <= holdings_.free() && nodes_needed(app) <= free_nodes();
  }

  void schedule(double now) override {
    while (!queue_.empty() && fits_now(queue_.front())) start(queue_.front(), now);
    if (queue_.size() < 2) return;
    // The head's reservation: when running jobs, ending at their limits, free enough capacity
    // and nodes for it. A job that ended holds capacity until its stage-out, nodes no more.
    const double need = request_of(queue_.front());
    const int need_nodes = nodes_needed(queue_.front());
    double available = holdings_.free();
    int available_nodes = free_nodes();
    double shadow = now;
    for (const auto& r : releases(now)) {
      if (available >= need && available_nodes >= need_nodes) break;
      available += r.bytes;
      available_nodes += r.nodes;
      shadow = r.at;
    }
    double extra = available - need;
    int extra_nodes = available_nodes - need_nodes;
    std::vector<AppId> candidates(std::next(queue_.begin()), queue_.end());
    if (order_ == BackfillOrder::ShortestFirst)
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](AppId a, AppId b) { return walltime_of(a) < walltime_of(b); });
    for (AppId app : candidates) {
      const double bytes = request_of(app);
      const int nodes = nodes_needed(app);
      const bool done_before_shadow =
          walltime_of(app) < kNoLimit && now + walltime_of(app) <= shadow;
      if (fits_now(app) && (done_before_shadow || (bytes <= extra && nodes <= extra_nodes))) {
        if (!done_before_shadow) {
          extra -= bytes;
          extra_nodes -= nodes;
        }
        start(app, now);
      }
    }
  }

  BackfillOrder order_;
};

}  // namespace

std::unique_ptr<Scheduler> make_slurm_easy(SchedulerConfig config, Actions& actions) {
  return std::make_unique<SlurmEasy>(std::move(config), actions, BackfillOrder::Submission);
}

std::unique_ptr<Scheduler> make_slurm_easy_sjf(SchedulerConfig config, Actions& actions) {
  return std::make_unique<SlurmEasy>(std::move(config), actions, BackfillOrder::ShortestFirst);
}

}  // namespace harmonia::core
