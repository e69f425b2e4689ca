#pragma once
/// @file Cross-application coordination of staging and flushing (BBIO, e-Science 2016, section
/// III and V): jobs report their I/O phases and flush needs; a coordinator answers with one
/// directive per job (stage or write through, may it flush now, which PFS servers to use). Pure
/// policy code, as the burst-buffer schedulers: the daemon and tests drive the same objects.
/// See docs/coordination.md.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace harmonia::core::coordination {

using JobId = int;

struct JobInfo {
  std::string name;
  int processes = 1;
  double bytes_per_process = 0;  ///< the job's declared I/O per process, for proportional splits
  int priority = 0;              ///< higher flushes first under the priority heuristic
};

enum class Mode { WriteThrough, Stage };

struct Directive {
  Mode mode = Mode::WriteThrough;
  bool flush_allowed = true;   ///< may write its staged data to the PFS now
  std::vector<int> servers;    ///< PFS servers to place new files on; empty: all of them
  double min_request_gap = 0;  ///< seconds the job must leave between the starts of two writes
  bool operator==(const Directive&) const = default;
};

/// How flushes of staged data are serialised when several jobs want to flush (section V).
enum class FlushOrder {
  Free,      ///< every job may flush whenever its strategy allows
  Token,     ///< one token, passed in request order; only its holder flushes
  Window,    ///< round-robin time windows among the jobs waiting to flush
  Priority,  ///< one at a time, highest priority first (then request order)
};

struct CoordinatorConfig {
  int pfs_servers = 1;
  FlushOrder flush_order = FlushOrder::Free;
  double window_seconds = 1.0;  ///< FlushOrder::Window
  double throttle_gap = 0.001;  ///< the "throttle" strategy's minimum gap between writes
  /// FlushOrder::Token and Priority: a job holding the token longer than this goes to the back
  /// of the line and the next waiting job gets it, so one job cannot stall the others beyond it
  /// (0: no bound).
  double max_token_seconds = 60;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorConfig config);
  virtual ~Coordinator() = default;

  // Events in; `now` in seconds, never decreasing. Each returns nothing: read `directive`.
  JobId on_register(const JobInfo& info, double now);
  void on_unregister(JobId job, double now);
  void on_io_begin(JobId job, double now);
  void on_io_end(JobId job, double now);
  /// The job holds staged data and has no other work left (its buffer is full, or it closes or
  /// syncs a file): it would flush now if allowed.
  void on_flush_request(JobId job, double now);
  /// The job has written out everything it had staged.
  void on_flush_done(JobId job, double now);
  /// Time passes (time windows move on).
  void on_tick(double now);

  /// The directive in force for `job`.
  const Directive& directive(JobId job) const;
  /// Jobs whose directive changed since the last call (each listed once), for the daemon to send.
  std::vector<JobId> take_changed();

 protected:
  struct Job {
    JobInfo info;
    bool registered = true;
    bool in_io = false;
    double io_since = 0;
    bool wants_flush = false;
    double flush_since = 0;
    Directive directive;
  };

  /// Called once per update, before `strategy` is asked about jobs: precompute what their
  /// directives share (a line, a split), so that an update costs what the competing jobs cost.
  virtual void plan(double now);
  /// Strategy hook: the mode, flush permission (before flush ordering) and servers of `job`.
  virtual Directive strategy(JobId job, double now) const = 0;
  /// Whether directives depend on registered jobs outside any I/O phase (static partitioning):
  /// then a registration or unregistration recomputes every job.
  virtual bool depends_on_idle_jobs() const { return false; }

  /// Registered jobs in an I/O phase or holding data to flush (the only ones a directive other
  /// than the default can concern, unless `depends_on_idle_jobs`), by id.
  const std::set<JobId>& competing() const { return competing_; }
  /// Jobs currently in an I/O phase, earliest first.
  std::vector<JobId> in_io_by_start() const;
  /// `count` servers split among `jobs` in proportion to their data (processes x bytes per
  /// process), each at least one; returns contiguous server lists in the order of `jobs`.
  std::vector<std::vector<int>> proportional_split(const std::vector<JobId>& jobs) const;
  /// Changes on every registration and unregistration, so strategies can cache by it.
  std::uint64_t membership_version() const { return membership_version_; }

  CoordinatorConfig config_;
  std::vector<Job> jobs_;

 private:
  /// Recomputes the directives `event_job`'s event may have changed.
  void update(double now, std::optional<JobId> event_job, bool membership_changed);
  void set_competing(JobId job);

  std::vector<bool> changed_;
  std::vector<JobId> changed_list_;  ///< the jobs flagged in `changed_`, for take_changed
  std::set<JobId> competing_;
  std::set<JobId> not_default_;  ///< jobs whose directive is not the default one
  std::uint64_t membership_version_ = 0;
  std::optional<JobId> token_holder_;
  double token_since_ = 0;  ///< when the holder got the token
};

/// Names of the coordination strategies: none, 1a, 1b, 2a, 2b, 3a, 3b, throttle.
std::vector<std::string> coordinator_names();
/// A coordinator by name; throws std::invalid_argument naming an unknown strategy.
std::unique_ptr<Coordinator> make_coordinator(const std::string& name, CoordinatorConfig config);
/// Names of the flush orders: free, token, window, priority.
std::vector<std::string> flush_order_names();
/// Parses a flush order's name; throws std::invalid_argument naming an unknown one.
FlushOrder parse_flush_order(const std::string& name);

}  // namespace harmonia::core::coordination
