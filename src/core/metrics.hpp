#pragma once
/// @file Records what a scheduler did and turns it into the Harmonia paper's metrics
/// (Eq. 4-7) plus per-application times. Fed by `Scheduler`; pure bookkeeping.

#include <string>
#include <vector>

#include "core/device.hpp"

namespace harmonia::core {

struct PhaseRecord {
  int app = 0;
  int index = 0;
  double bytes = 0;
  double requested = 0;
  double granted = -1;
  double end = -1;
  double io_alone = 0;
  std::vector<int> buffers;
  Op op = Op::Write;
};

struct DrainRecord {
  int buffer = 0;
  double start = 0;
  double end = 0;
  double bytes = 0;
};

/// A read phase's data staged in from the PFS onto the buffers.
struct PrefetchRecord {
  int app = 0;
  int index = 0;
  double bytes = 0;
  double start = 0;
  double end = -1;
};

struct AppRecord {
  std::string name;
  double arrival = 0;
  double start = -1;
  double end = -1;
};

struct AppMetrics {
  std::string name;
  double arrival = 0, start = 0, end = 0, completion = 0;
  double wait = 0, compute = 0, io = 0, stall = 0;
  double bytes = 0, bandwidth = 0, interference_factor = 1;
};

struct SystemMetrics {
  double buffer_efficiency = 0;    ///< Eq. 4: (B_U + C_R) / 2
  double buffer_utilization = 0;   ///< B_U
  double remaining_capacity = 0;   ///< C_R
  double avg_phase_bandwidth = 0;  ///< Eq. 5
  double fairness = 0;             ///< Eq. 6
  double avg_stall = 0;            ///< Eq. 7, per application
  double avg_completion = 0, min_completion = 0, max_completion = 0;
  double avg_wait = 0, avg_io = 0, avg_compute = 0, makespan = 0;
  double avg_app_bandwidth = 0, avg_interference_factor = 0;
};

class Recorder {
 public:
  explicit Recorder(int buffer_count, double buffer_capacity);

  void app_arrived(int app, const std::string& name, double now);
  void app_started(int app, double now);
  void app_ended(int app, double now);
  void phase_requested(int app, int index, double bytes, double now, Op op = Op::Write);
  void phase_granted(int app, int index, const std::vector<int>& buffers, double io_alone,
                     double now);
  void phase_completed(int app, int index, double now);
  /// The buffer's state changed: whether it is serving I/O or draining, and its used bytes.
  void buffer_changed(int buffer, bool busy, double used, double now);
  void drain_started(int buffer, double now);
  void drained(int buffer, double bytes, double now);
  void drain_stopped(int buffer, double now);
  void prefetch_started(int app, int index, double bytes, double now);
  void prefetch_done(int app, int index, double now);

  /// The application's arrival and, once it happened, its start (admitted, its batch stage-in
  /// done) and end; -1 before.
  const AppRecord& app(int app) const { return apps_.at(static_cast<size_t>(app)); }
  const std::vector<PhaseRecord>& phases() const { return phases_; }
  const std::vector<DrainRecord>& drains() const { return drains_; }
  const std::vector<PrefetchRecord>& prefetches() const { return prefetches_; }
  /// Positions in `phases()` of the application's phase records, in the order they were made.
  const std::vector<size_t>& phases_of(int app) const;

  std::vector<AppMetrics> app_metrics() const;
  SystemMetrics system_metrics() const;

  /// The records of the applications `apps` (ids in increasing order) renumbered 0, 1, ... in
  /// that order, records kept in their order, with no history of the buffers (each one's current
  /// state, and its drain if one runs): what a look-ahead from now needs, at the cost of the
  /// applications it names instead of the whole run.
  Recorder live_part(const std::vector<int>& apps) const;

 private:
  PhaseRecord& phase(int app, int index);
  /// The application's list of positions in `records`, grown to hold it.
  static std::vector<size_t>& slot(std::vector<std::vector<size_t>>& by_app, int app);

  struct BufferTrack {
    bool busy = false;
    double used = 0;
    // Integrals over time, split at each change, kept as (time, busy, used) steps.
    std::vector<std::tuple<double, bool, double>> steps;
    int open_drain = -1;  // index into drains_ of the running drain
  };

  int buffer_count_;
  double buffer_capacity_;
  std::vector<AppRecord> apps_;
  std::vector<PhaseRecord> phases_;
  std::vector<DrainRecord> drains_;
  std::vector<PrefetchRecord> prefetches_;
  std::vector<BufferTrack> buffers_;
  // Per application, positions in phases_ and prefetches_: a record is found among its own
  // application's, not among every record of the run.
  std::vector<std::vector<size_t>> phases_by_app_;
  std::vector<std::vector<size_t>> prefetches_by_app_;
};

}  // namespace harmonia::core
