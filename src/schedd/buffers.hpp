#pragma once
/// @file The scheduler daemon's burst-buffer side (docs/buffer-nodes.md): the Harmonia policy core
/// (core/scheduler.hpp, the code the simulator runs) fed with the daemon's jobs, their I/O phases
/// and the reports of the buffer nodes' monitors, and its decisions turned into grants (the nodes
/// a job's phase writes to) and drain orders (what a node drains to the PFS). No sockets, no
/// threads: `Service` drives it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/control.pb.h"
#include "core/accounting.hpp"
#include "core/pricing.hpp"
#include "core/scheduler.hpp"
#include "schedd/jobs.hpp"

namespace harmonia::schedd {

struct BufferConfig {
  std::string policy = "max-bandwidth";  ///< a core policy (core/registry.hpp)
  int count = 1;                         ///< buffer nodes the policy places on
  double capacity = 1e9;                 ///< bytes per node
  double write_bw = 500e6;               ///< one node's device, bytes/s (its profile)
  double read_bw = 550e6;
  int concurrency = 4;
  double interference_slope = 0.3;  ///< I_f(n) = 1 + slope (n - 1)
  double link_bw = 1.25e9;          ///< network into one node and out of one client
  double flush_threshold = 0.5;
  int backup_flushers = 0;
  std::optional<int> max_colocated;
  std::optional<int> max_running_apps;  ///< jobs a policy runs at once (0: none; policy default)
  int min_buffers = 1;
  /// DataWarp: a job writing past its reservation gets a temporary extension (paper II-c).
  bool extend_reservations = false;
  /// What the `auto` policy minimises (makespan, mean_completion, stall or slowdown).
  std::string auto_objective = "stall";
  double phase_bytes = 64e6;  ///< per process, for a phase that declares no size
  /// Most bytes one job's phase (and a DataWarp reservation) may ask for, whatever it declares;
  /// 0: no bound but max_phase_share's.
  double max_phase_bytes = 0;
  /// The share of all buffers one job's phase may have at most: of their bytes together, and of
  /// the nodes (rounded up; core::SchedulerConfig::max_phase_buffers). A job declaring more than
  /// there is cannot hold every buffer while others wait (fair admission).
  double max_phase_share = 0.5;
  std::uint64_t stripe_bytes = 1 << 20;
  double report_seconds = 0.1;
  /// A node's part of a stage-in must be done within stage_in_grace seconds plus its share of
  /// the bytes at stage_in_min_rate bytes/s from its placement; a later one is given up, and its
  /// files are read from the PFS (docs/buffer-nodes.md, "Stage-in").
  double stage_in_grace = 30;
  double stage_in_min_rate = 16e6;
  /// The price of a node-hour and the I/O service classes jobs may name (core/pricing.hpp).
  core::PricingConfig pricing{};
  /// Called with the seconds a phase waited for its grant, as it is granted (metrics).
  std::function<void(double seconds)> on_phase_granted;

  /// The policy core's configuration; throws std::invalid_argument naming a bad setting.
  core::SchedulerConfig scheduler_config() const;
  /// The most one job's phase may ask for: max_phase_share of all buffers together, and at most
  /// max_phase_bytes when set.
  double phase_bound() const;
};

class BufferBroker : private core::Actions {
 public:
  /// Times are the daemon's clock; `origin` (its start) is time 0 in the policy's records. The
  /// jobs are the daemon's table's: the broker reads who each is, and keeps its phases' map
  /// (JobRecord::buffer) there. Throws std::invalid_argument naming a bad policy or setting.
  BufferBroker(BufferConfig config, double origin, JobTable& jobs);
  ~BufferBroker() override;

  // Jobs, as the daemon sees them (a job is all processes with one key).
  /// The job the daemon just added to its table: the policy core learns of it, under the same
  /// number. `cached`: the job reads back what it writes; its data stays on the buffers until it
  /// ends. `io_qos`: its I/O service class (empty: normal); throws std::invalid_argument naming
  /// an unknown one before the core learns of the job.
  void add_job(JobNumber job, double declared_bytes, bool cached, double now,
               const std::string& io_qos = {});
  /// The job's first process entered an I/O phase of `bytes` (0: the default size). `read`: its
  /// announced read phase (announce_read); a read phase with nothing announced reads the PFS
  /// and is no buffer phase.
  void phase_begin(JobNumber job, double bytes, double now, bool read = false);
  /// A file a read phase reads: its name relative to the PFS root, and its size.
  struct ReadFile {
    std::string name;
    std::uint64_t size = 0;
  };
  /// The job will read `files` in its next read phase: the policy may stage them in ahead
  /// (a core read phase, `Scheduler::on_prefetch_request`), on the nodes' copies made with the
  /// file-system identity `uid`/`gid`. Ignored while the job has a read phase announced and not
  /// ended, for a list it announced before, and for files that together are empty or larger than
  /// one phase may ask for (its reads go to the PFS). Returns whether a read phase was announced.
  bool announce_read(JobNumber job, const std::vector<ReadFile>& files, std::uint32_t uid,
                     std::uint32_t gid, double now);
  /// Its last process left the phase.
  void phase_end(JobNumber job, double now);
  /// Its last process left (the table ended it): its data drains (DataWarp: stage-out).
  void job_end(JobNumber job, double now);

  // Buffer nodes (the monitors' connections).
  /// The slot a node at `address` registered for, if any.
  std::optional<int> node_slot(const std::string& address) const;
  /// A node at `address` registers: its slot (the same again after a restart), or nullopt when
  /// every slot belongs to another address. The policy places by the configured capacity; a
  /// node refuses writes beyond its own.
  std::optional<int> register_node(const std::string& address);
  void node_report(int node, const control::BufferReport& report, double now);
  void node_gone(int node);
  /// The address the node in slot `node` registered with.
  const std::string& node_address(int node) const {
    return nodes_.at(static_cast<size_t>(node)).address;
  }

  /// Lets the policy decide (grants, drains); the daemon's timer calls it, so that decisions
  /// that wait only for time (a stage-in's deadline, a held-back phase's release) are taken.
  void tick(double now);
  /// Lets the policy decide if an event reached it since it last did, or a time it waits for
  /// has come (a stage-in's deadline, a held-back phase's release): call after each request. A
  /// heartbeat, or a node's report that changes nothing, then costs no decision.
  void decide_if_changed(double now) {
    if (events_ || time_due(now)) tick(now);
  }

  /// The job's part of its directive: buffer_mode, buffers, stripe_bytes, await_grant.
  void fill_directive(JobNumber job, control::Directive& out) const;
  void fill_order(int node, control::DrainOrder& out) const;
  void fill_status(control::Status& out) const;
  /// Seconds the job's phases have waited for grants (including one waiting now).
  double wait_seconds(JobNumber job, double now) const;
  /// The live jobs whose directive changed, and the nodes whose drain order changed, since the
  /// last call.
  std::vector<JobNumber> take_changed_jobs();
  std::vector<int> take_changed_nodes();
  /// The policy core's per-job and system metrics (as harmonia-sim writes them).
  std::string results_json() const;
  /// One accounting record per job at `now` (the daemon's clock), JobID its key, NCPUS its
  /// ranks; times are the daemon's clock plus `clock_offset` (Unix time minus it).
  std::vector<core::AccountingRecord> accounting(double now, double clock_offset) const;

  const BufferConfig& config() const { return config_; }

 private:
  /// A read phase announced to the policy core, until the core no longer holds its data.
  struct ReadPlan {
    std::vector<std::string> files;
    std::uint32_t uid = 0, gid = 0;
    std::vector<int> buffers;      ///< where the core placed its stage-in, in stripe order
    std::set<int> staged;          ///< nodes that reported the stage-in done
    std::set<std::string> failed;  ///< files some node could not copy
    double bytes = 0;
    double deadline = 0;      ///< when a node's unfinished part is given up (placed: set)
    bool submitted = false;   ///< handed to the core (on_prefetch_request)
    bool prefetched = false;  ///< reported to the core (on_prefetched)
  };
  struct NodeState {
    std::string address;
    bool connected = false;
    bool draining = false;  ///< the policy wants it to drain
    control::DrainOrder order;
    control::BufferReport last;
    bool reported = false;
    std::set<std::string> orphans;  ///< jobs it holds data of that the policy does not know
    std::map<std::string, std::uint64_t> drained_by_job;  ///< as last reported
    std::uint64_t stage_ins_late = 0;  ///< its parts of stage-ins given up at their deadline
  };

  // core::Actions
  void admit(core::AppId app) override;
  void grant(const core::PhaseRequest& phase, const std::vector<core::BufferId>& buffers) override;
  void start_drain(core::BufferId buffer) override;
  void stop_drain(core::BufferId buffer) override;
  void start_prefetch(const core::PhaseRequest& phase,
                      const std::vector<core::BufferId>& buffers) override;

  /// Whether a decision waits for `now` alone: a stage-in past its deadline, or a phase held
  /// back by its I/O class whose release has come.
  bool time_due(double now) const;
  void submit_phase(JobNumber job, double now);
  /// The job's current phase as the policy core runs it: null until it is granted, and once
  /// it has ended (the core is the one record of grants).
  const core::RunningPhase* current_grant(JobNumber job) const;
  /// Whether the policy core started the job (admitted it, its batch stage-in done): only
  /// then are its phases the core's to place.
  bool started(JobNumber job) const;
  /// Marks the jobs with a phase running on `node` (their directives name it).
  void mark_jobs_on(int node);
  /// Tells on_phase_granted how long `phase` waited.
  void note_grant_wait(const core::PhaseRequest& phase) const;
  /// Hands the job's announced read phase to the core once the job runs.
  void submit_announced_read(JobNumber job, double now);
  /// A node reported the stage-ins it holds: the core learns of the prefetches every node of
  /// which is done.
  void note_staged(int node, const control::BufferReport& report);
  /// The prefetch is done on `node` (reported, or the node is gone: its files fail).
  void stage_done(ReadPlan& plan, JobNumber job, int index, int node);
  /// `node` cannot copy its part (gone, or no node in its slot): every file is read from the PFS.
  void stage_failed(ReadPlan& plan, JobNumber job, int index, int node);
  /// Gives up the parts of stage-ins still unfinished at their deadline.
  void give_up_late_stage_ins();
  void advance(double now);
  /// The core's phase completion, and a new order epoch for the phase's nodes.
  void complete_phase(JobNumber job, int index, const std::vector<int>& buffers);
  void mark_job(JobNumber job);
  void mark_node(int node);
  /// Recomputes each node's order from the policy's state; marks the nodes whose order changed.
  void update_orders();

  BufferConfig config_;
  std::unique_ptr<core::Scheduler> scheduler_;
  JobTable& jobs_;
  std::vector<NodeState> nodes_;
  std::map<std::pair<JobNumber, int>, ReadPlan> reads_;  ///< by (job, read phase index)
  std::vector<JobNumber> changed_jobs_;
  std::vector<int> changed_nodes_;
  /// Events that arose inside a policy call, run once it has returned.
  std::vector<std::function<void()>> deferred_;
  double origin_;
  double now_ = 0;      ///< seconds since origin_
  bool events_ = true;  ///< an event reached the policy (or the orders) since the last tick
};

}  // namespace harmonia::schedd
