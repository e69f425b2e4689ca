#pragma once
/// @file The scheduler interface shared by the simulator, the daemon and the tests: events in
/// (`on_*`), decisions out (`Actions`). Policies derive from `Scheduler` and implement `decide`.

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/metrics.hpp"

namespace harmonia::core {

using AppId = int;
using BufferId = int;

/// Byte counts are sums of floating-point shares: a difference smaller than this is dust.
inline constexpr double kByteEpsilon = 1e-3;

enum class Hint { Flushable, Cached };
enum class PriorityTie { Share, Fcfs };

struct PhaseRequest {
  AppId app = 0;
  int index = 0;
  double bytes = 0;
  /// The phase's kind: a write phase goes to the buffers and drains to the PFS; a read phase
  /// reads data staged in from the PFS (a prefetch) or left on the buffers by `source_phase`.
  Op op = Op::Write;
  int priority = 0;
  /// Read phases: the index of the same application's earlier write phase whose data this one
  /// reads back (read-after-write), or -1 when the data is only on the PFS.
  int source_phase = -1;
};

struct AppInfo {
  std::string name;
  int nodes = 1;
  int priority = 0;
  Hint hint = Hint::Flushable;
  double declared_bytes = 0;  ///< total I/O the job declares (the DataWarp reservation size)
  std::string user{};         ///< who submitted it (ThemisIO's user-fair); empty: its own name
  double walltime = 0;        ///< requested time limit, seconds (EASY backfilling); 0: none
  /// The reservation holds intermediate results the job never reads back (paper II-d): its data
  /// may be staged out early and its unused space lent (`SchedulerConfig::lend_write_only`).
  bool write_only = false;
  /// Its I/O service class (core/pricing.hpp), as named in the accounting records.
  std::string io_qos = "normal";
  /// The I/O slowdown its class accepts (>= 1): its phases yield to those of jobs accepting
  /// less, for at most half the slack this allows (docs/scheduling-model.md, section 9).
  double io_slowdown = 1;
  /// Read phases the job declares when it is submitted (Slurm's `#DW stage_in`): the policies
  /// that stage in before a job starts (`datawarp`, `slurm-easy`) prefetch them then; the others
  /// prefetch each read phase when it is announced (`Scheduler::on_prefetch_request`).
  std::vector<PhaseRequest> declared_reads{};
};

struct SchedulerConfig {
  explicit SchedulerConfig(DeviceModel device) : buffer_device(std::move(device)) {}

  DeviceModel buffer_device;
  int buffer_count = 1;
  double buffer_capacity = 0;        ///< bytes per buffer node
  double buffer_link_bw = 0;         ///< network bandwidth into one buffer node
  double client_node_bw = 0;         ///< network bandwidth of one compute node
  double flush_threshold = 0;        ///< fill fraction at which a buffer starts draining
  int backup_flushers = 0;           ///< buffers that may drain exclusively at once (section V-D)
  std::optional<int> max_colocated;  ///< X; derived from if_limit when absent
  double if_limit = 5.0;
  int min_buffers = 1;  ///< Y
  /// The most buffers one phase is placed on by the policies that run phases apart, each on
  /// buffers of its own (max-bandwidth, min-stall, max-buffer-efficiency, fairness, priority):
  /// one job in a long phase cannot keep every other job off the buffers. The other policies
  /// share the buffers between jobs by their own rule. 0: no bound.
  int max_phase_buffers = 0;
  PriorityTie priority_tie = PriorityTie::Share;
  /// Admission limit: applications a policy runs at once (admitted and not ended); the others
  /// wait in line, first come first served. 0: no limit; absent: the policy's default, from the
  /// paper's examples (docs/scheduling-model.md, section 5). DataWarp admits by capacity instead.
  std::optional<int> max_running_apps;
  uint64_t seed = 1;
  /// The compute nodes of a machine the jobs share: a job starts once nodes are free for it
  /// (first come first served with EASY backfilling by time limit, section 5 of
  /// docs/scheduling-model.md) and holds them until it ends. 0: every job has nodes of its own.
  int compute_nodes = 0;
  /// DataWarp (paper II-c): a phase that takes its job past its reservation gets a temporary
  /// extension from unreserved capacity (waiting for it if none is free) instead of being let
  /// through unaccounted; the extension is freed with the reservation at stage-out.
  bool extend_reservations = false;
  /// DataWarp (paper II-d): a queued job may be admitted on the unused space of write-only
  /// reservations; the lenders get their space back first.
  bool lend_write_only = false;
  /// The `auto` policy (policies/auto.cpp): what it minimises (makespan, mean_completion, stall
  /// or slowdown) and the policies it chooses among (empty: every phase-scheduling policy).
  std::string auto_objective = "stall";
  std::vector<std::string> auto_candidates{};
  /// The `plan-based` peer (policies/plan_based.cpp): the power of each job's waiting time in
  /// the plan's cost (1: the sum, 2: the sum of squares), and how many jobs first in line are
  /// started or reserved before the others are planned.
  double plan_alpha = 2;
  int plan_reservation_depth = 0;

  int resolved_max_colocated() const;
  /// max_phase_buffers, or buffer_count when there is no bound.
  int phase_buffer_bound() const;
};

/// Decisions a scheduler emits. The simulator, the daemon and tests implement this.
class Actions {
 public:
  virtual ~Actions() = default;
  /// The application may start running (its batch-queue reservation is granted).
  virtual void admit(AppId app) = 0;
  /// The phase may do its I/O, striped evenly over `buffers`.
  virtual void grant(const PhaseRequest& phase, const std::vector<BufferId>& buffers) = 0;
  /// The buffer should drain its drainable data to the PFS, chunk by chunk, reporting each chunk
  /// with `Scheduler::on_drained` until `stop_drain` or until nothing is drainable.
  virtual void start_drain(BufferId buffer) = 0;
  virtual void stop_drain(BufferId buffer) = 0;
  /// Stage the read phase's data in from the PFS onto `buffers` (`phase.bytes` striped evenly
  /// over them), then report it with `Scheduler::on_prefetched`. The read itself is granted later.
  virtual void start_prefetch(const PhaseRequest& phase, const std::vector<BufferId>& buffers) = 0;
};

/// Bytes that one application holds on one buffer, in arrival order.
struct HeldData {
  AppId app = 0;
  int phase = 0;
  double bytes = 0;
  bool drainable = false;
  /// A copy of PFS data staged in for a read phase: never drained, dropped when released.
  bool clean = false;
};

struct BufferState {
  double capacity = 0;
  double used = 0;  ///< bytes written or promised to granted phases, not yet drained
  int phases = 0;   ///< I/O phases running on it
  bool draining = false;
  bool exclusive_flush = false;  ///< backup-flusher mode: takes no new I/O until drained
  std::deque<HeldData> held;

  /// Bytes a new phase may still take (dust left by summing shares counts as free).
  double free() const { return capacity - used + kByteEpsilon; }
  double drainable() const;
  /// Once the buffer holds nothing, forgets the rounding dust `used` gathered from the shares
  /// added and taken away: over a long trace it outgrows kByteEpsilon, and a phase asking for
  /// the whole of an empty buffer would never fit.
  void forget_dust_if_empty() {
    if (held.empty()) used = 0;
  }
};

struct RunningPhase {
  PhaseRequest request;
  std::vector<BufferId> buffers;
  double requested = 0;
  double granted = 0;
  /// The stage-in of a read phase's data, not the application's own I/O.
  bool prefetch = false;
};

/// A read phase from its announcement (or request) until it completes.
struct ReadPhase {
  enum class Stage {
    Pending,      ///< its prefetch waits in `pending_` for the policy
    Prefetching,  ///< staging in from the PFS
    Ready,        ///< its data is on `buffers`
    Running,      ///< the application reads it
  };
  PhaseRequest request;
  Stage stage = Stage::Pending;
  std::vector<BufferId> buffers;
  bool requested = false;  ///< the application asked to read (it may have been announced only)
  double requested_at = 0;
  bool from_source = false;  ///< reads `request.source_phase`'s data where it was written
};

struct PendingPhase {
  PhaseRequest request;
  double requested = 0;
};

struct AppState {
  AppInfo info;
  bool admitted = false;
  bool ended = false;
  double held_bytes = 0;   ///< bytes on buffers not yet drained
  bool drained = false;    ///< ended and all its data drained (on_app_drained was called)
  double admitted_at = 0;  ///< when it was admitted (its time limit counts from then)
  double arrival = 0;      ///< when it registered (was submitted)
};

/// How a policy lets drains share a buffer with I/O phases.
enum class DrainMode {
  Overlap,    ///< drains run alongside I/O phases (and interfere with them)
  YieldToIO,  ///< drains pause while an I/O phase runs on the buffer
};

class Scheduler {
  /// The `auto` policy's look-ahead copies a scheduler's state into other policies and drives
  /// them (core/lookahead.hpp).
  friend class Lookahead;

 public:
  Scheduler(SchedulerConfig config, Actions& actions);
  virtual ~Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Events in. `now` is in seconds and never decreases. Events only update the state (and the
  // batch-queue admissions of `admit_on_register`); the policy decides in `on_tick`, which the
  // host calls once it has delivered every event of an instant, so that simultaneous requests are
  // scheduled together (the paper's scheduling window).
  AppId on_app_register(const AppInfo& info, double now);
  void on_phase_request(const PhaseRequest& request, double now);
  /// The application will read `request` (a read phase) after its current computation: its data
  /// may be prefetched ahead (paper IV-B, "Additional discussion"). Optional: a read phase that
  /// was not announced is prefetched when requested.
  void on_prefetch_request(const PhaseRequest& request, double now);
  /// The stage-in of read phase (app, index) has placed all its data on its buffers.
  void on_prefetched(AppId app, int index, double now);
  void on_phase_complete(AppId app, int index, double now);
  /// A drain chunk of `bytes` from `buffer` reached the PFS.
  void on_drained(BufferId buffer, double bytes, double now);
  void on_app_end(AppId app, double now);
  /// The buffer's own count of the bytes it holds of `app`, taken when no phase of `app` runs on
  /// it: the policy's count follows it. Jobs write less or more than they declare, and a client
  /// whose buffer died writes its stripes to the others. Ignored while a phase of `app` runs on
  /// the buffer (the policy counts that phase's reservation, the buffer what arrived so far).
  /// Written data only: copies staged in for read phases are the policy's to count.
  void on_held_reported(BufferId buffer, AppId app, double bytes, double now);
  /// Let the policy decide: grant pending phases, start and stop drains.
  void on_tick(double now);

  const std::vector<BufferState>& buffers() const { return buffers_; }
  const std::vector<AppState>& apps() const { return apps_; }
  const std::vector<ReadPhase>& reads() const { return reads_; }
  /// The phases waiting for the policy, in request order.
  const std::vector<PendingPhase>& pending() const { return pending_; }
  /// The application's phase `index` while it runs (granted, not completed), else null; never
  /// a read phase's stage-in.
  const RunningPhase* running_phase(AppId app, int index) const;
  /// The granted phases and stage-ins under way.
  const std::vector<RunningPhase>& running() const { return running_; }
  const Recorder& recorder() const { return recorder_; }
  /// Compute nodes no running job holds (unbounded when every job has nodes of its own).
  int free_nodes() const;
  /// When a phase held back by discounted scheduling is released, if one is: the host must call
  /// `on_tick` then even if no event arrives (the simulator's decider and the daemon's timer do).
  std::optional<double> next_release() const { return next_release_; }

 protected:
  /// Policy hook: called by `on_tick`; grants pending phases with `grant`.
  virtual void decide(double now) = 0;
  /// Policy hook: a new application arrives; the default admits it at once.
  virtual void admit_on_register(AppId app, double now);
  /// Policy hook: whether data of a finished phase may drain before its application ends.
  virtual bool drain_before_app_end(AppId app) const;
  /// Policy hook: an application's data has all drained after it ended.
  virtual void on_app_drained(AppId app, double now);
  /// Policy hook: a job ended on a machine the jobs share and its nodes are free again (the
  /// queue of `admit_waiting` has had them): a policy with a queue of its own admits from it.
  virtual void on_nodes_freed(double now);
  virtual DrainMode drain_mode() const { return DrainMode::Overlap; }
  /// The policy's admission limit when the configuration sets none; 0: no limit.
  virtual int default_max_running_apps() const { return 0; }
  virtual double flush_threshold() const { return config_.flush_threshold; }
  virtual int backup_flushers() const { return config_.backup_flushers; }
  /// Policy hook: whether a job's declared reads are staged in before it starts and stay on the
  /// buffers until it ends (batch-queue burst buffers: DataWarp, Slurm), instead of each read
  /// phase being prefetched when announced and released after it is read.
  virtual bool stages_in_before_start() const { return false; }

  void admit(AppId app, double now);
  /// The admission limit in force (0: none).
  int max_running_apps() const;
  /// Start the pending phase (app, index) on `buffers`: a write phase runs; the pending entry of a
  /// read phase is its prefetch, which reserves `bytes` on the buffers and stages the data in.
  void grant(AppId app, int index, const std::vector<BufferId>& buffers, double now);
  /// Buffers a new phase of `app` may use: not flushing exclusively, not holding another
  /// running application's cached data.
  bool placeable(BufferId buffer, AppId app) const;
  /// Whether `app` holds cached data on some buffer, which only it may place phases on.
  bool holds_cached(AppId app) const;
  /// Whether `bytes` could be placed striped over every placeable buffer.
  bool fits_somewhere(double bytes, AppId app) const;
  /// In-job I/O of the batch-reservation policies: every pending phase whose stripes fit on
  /// every buffer now is granted on all of them, in request order, with no interference
  /// awareness.
  void grant_on_every_buffer(double now);
  /// The applications admitted and not ended, by id.
  const std::set<AppId>& running_apps() const { return running_apps_; }
  /// The compute nodes `app` needs on a shared machine (0 when every job has its own).
  int nodes_needed(AppId app) const;
  /// When a running job is expected to end: at its time limit from its admission, but not
  /// before `now`; never for a job without a limit.
  double expected_end(AppId app, double now) const;

  SchedulerConfig config_;
  Actions& actions_;
  std::vector<BufferState> buffers_;
  std::vector<AppState> apps_;
  std::vector<PendingPhase> pending_;
  std::vector<RunningPhase> running_;
  std::vector<ReadPhase> reads_;
  int max_colocated_;
  /// Set by `decide` when it left a phase waiting for lack of space: drains then run regardless
  /// of the threshold. Cleared at every tick.
  bool capacity_blocked_ = false;

 private:
  void assign_flushers();
  /// Work conservation, whatever the policy's rule: when no phase runs, nothing is left to drain
  /// and phases wait, no waiting can free space, so the oldest waiting phase starts on the fewest
  /// emptiest buffers that hold it (the batch-reservation policies wait for their reservations).
  void start_one_if_stuck(double now);
  /// Stops the buffer's drain once it holds nothing drainable.
  void stop_drain_if_done(BufferId buffer, double now);
  /// Calls on_app_drained once, when `app` has ended and holds nothing more.
  void settle_if_drained(AppId app, double now);
  void update_drains(double now);
  bool capacity_pressure() const;
  /// Admits waiting applications, first come first served, while the admission limit and the
  /// free nodes allow; on a shared machine, later ones backfill around the first (EASY).
  void admit_waiting(double now);
  /// EASY backfilling of `waiting_` on compute nodes, behind its first job.
  void backfill_waiting(double now);
  /// Seconds `request` takes alone on `buffers` empty buffers.
  double io_alone(const PhaseRequest& request, size_t buffers) const;
  /// Discounted scheduling: takes out of `pending_`, for this decision, the phases that yield to
  /// those of less patient jobs and have not waited half their slack yet; sets `next_release_`.
  std::vector<PendingPhase> hold_back_yielding(double now);
  /// Puts the held-back phases back into `pending_`, in request order.
  void restore_held_back(std::vector<PendingPhase> held);

  /// Records the read phase (announced or requested): served from its source phase's data when
  /// that is still whole on the buffers, otherwise its prefetch waits in `pending_`.
  ReadPhase& track_read(const PhaseRequest& request, double now);
  std::vector<ReadPhase>::iterator find_read(AppId app, int index);
  /// Stages the read in on `buffers` (a prefetch the policy granted, or a batch stage-in).
  void start_prefetch(const PhaseRequest& request, double requested,
                      const std::vector<BufferId>& buffers, double now);
  /// Grants the requested reads whose data is on the buffers (the policy placed them when it
  /// placed their prefetch).
  void start_ready_reads(double now);
  /// Marks the phase running on `buffers` and tells the host.
  void start_phase(const PhaseRequest& request, double requested,
                   const std::vector<BufferId>& buffers, double now);
  /// Drops the application's staged-in copies on the buffer (of phase `index`, or all).
  void release_clean(BufferId buffer, AppId app, std::optional<int> index);
  /// Whether the source phase's data still lies whole on the buffers.
  bool source_on_buffers(AppId app, int source) const;
  /// The buffers holding the phase's data, and lets it drain (or not) as `drainable`.
  std::vector<BufferId> pin_phase(AppId app, int index, bool pinned);

  std::deque<AppId> waiting_;  ///< registered, not admitted yet (admission limit)
  std::set<AppId> running_apps_;
  size_t ended_apps_ = 0;
  int nodes_in_use_ = 0;  ///< compute nodes the running jobs hold on a shared machine
  std::optional<double> next_release_;
  std::vector<int> staging_in_;  ///< per application: stage-ins to finish before it starts
  /// Bytes each write phase (app, index) was granted, for read-after-write.
  std::vector<std::vector<double>> written_;

  Recorder recorder_;
};

}  // namespace harmonia::core
