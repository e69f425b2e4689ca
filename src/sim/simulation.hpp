#pragma once
/// @file Runs one policy on one scenario in SimGrid. One actor registers the applications as they
/// arrive; an admitted application is an actor that computes (as simulated time), requests each
/// I/O phase from the policy core and writes it to the granted buffers; one drain actor per
/// buffer moves drainable data to the PFS servers in chunks; one decider actor calls the policy
/// after all events of an instant (`Scheduler::on_tick`).

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "core/accounting.hpp"
#include "core/scheduler.hpp"
#include "sim/control_plane.hpp"
#include "sim/platform.hpp"
#include "sim/scenario.hpp"

namespace harmonia::sim {

struct RunResult {
  std::vector<core::AppMetrics> apps;
  core::SystemMetrics system;
  std::vector<core::PhaseRecord> phases;
  std::vector<core::DrainRecord> drains;
  std::vector<core::PrefetchRecord> prefetches;
  std::vector<core::AccountingRecord> accounting;  ///< one per application, at the end
  long long events = 0;                            ///< scheduler events plus simulated activities
  std::vector<PhaseControl> control;               ///< per phase, with a control plane modelled
  long long heartbeats = 0;                        ///< at most, with a control plane modelled
};

/// How a long run reports its progress (`harmonia-sim --progress`).
struct ProgressConfig {
  double every_seconds = 0;  ///< wall seconds between two reports; 0: none
  std::ostream* out = nullptr;
};

class Simulation final : public core::Actions {
 public:
  /// Bytes a drain actor moves per step; a stop request takes effect at the next step.
  static constexpr double kDrainChunk = 1e9;

  /// `control`: the messages between ranks and the scheduler (ranks_per_node 0: not modelled).
  Simulation(const Scenario& scenario, const std::string& policy, ControlConfig control = {},
             ProgressConfig progress = {});
  /// Runs the SimGrid engine to the end; throws std::runtime_error if applications never finish.
  RunResult run();

  void admit(core::AppId app) override;
  void grant(const core::PhaseRequest& phase, const std::vector<core::BufferId>& buffers) override;
  void start_drain(core::BufferId buffer) override;
  void stop_drain(core::BufferId buffer) override;
  void start_prefetch(const core::PhaseRequest& phase,
                      const std::vector<core::BufferId>& buffers) override;

 private:
  /// Waits for the application's arrival and registers it; returns its id.
  core::AppId register_app(size_t spec_index);
  /// A shared machine: registers every application at its arrival, in arrival order (ties in
  /// scenario order); each becomes an actor when admitted.
  void run_arrivals();
  /// Every job with nodes of its own: the job's actor, from before its arrival to its end.
  void run_own_nodes_app(size_t spec_index);
  /// An admitted application: its phases, from its first computation to its end.
  void run_app(size_t spec_index, core::AppId id, std::vector<size_t> node_indices);
  void run_drain(core::BufferId buffer);
  /// Moves one drain chunk from the buffer to the PFS servers and reports it; returns the next
  /// chunk's bytes (0: stop).
  double move_chunk(core::BufferId buffer, double chunk);
  /// The bytes of the buffer's next drain chunk; 0 when it should not drain (more).
  double next_chunk(size_t buffer) const;
  /// Why the run stalled: how many applications never finished, and what the first of them
  /// waits for.
  std::string stall_report() const;
  /// Stages a read phase in: every PFS server reads its stripe of each buffer's share and sends
  /// it to the buffer, whose device writes it.
  void run_prefetch(const core::PhaseRequest& phase, const std::vector<core::BufferId>& buffers);
  void run_decider();
  /// Ask the decider actor to run the policy once every event of this instant is delivered.
  void request_decision();
  /// Makes what the policy asked of the host during its last call (wake actors, start them).
  void apply_effects();
  simgrid::s4u::SemaphorePtr wakeup(core::AppId app);
  /// The compute nodes (indices) the application runs on: its own, or free nodes of a shared
  /// machine (taken from the free set).
  std::vector<size_t> take_nodes(size_t spec_index);
  /// Prints one progress line when `progress_.every_seconds` have passed since the last.
  void report_progress(bool last);

  const Scenario& scenario_;
  PlatformHosts hosts_;
  std::unique_ptr<core::Scheduler> scheduler_;
  std::map<core::AppId, simgrid::s4u::SemaphorePtr> app_wakeups_;
  std::map<core::AppId, std::vector<core::BufferId>> grants_;
  std::vector<simgrid::s4u::SemaphorePtr> drain_wakeups_;
  std::vector<bool> draining_;
  simgrid::s4u::SemaphorePtr decider_wakeup_;
  bool decision_requested_ = false;
  std::vector<int> first_node_;      ///< first compute node of each app spec (not shared)
  std::set<size_t> free_nodes_;      ///< compute nodes no job runs on (shared machine)
  std::vector<size_t> spec_of_app_;  ///< the spec of each registered application, by id
  std::unique_ptr<ControlPlane> control_;
  std::vector<std::function<void()>> effects_;  ///< asked by the policy, not made yet
  ProgressConfig progress_;
  std::chrono::steady_clock::time_point started_, last_report_;
  size_t apps_finished_ = 0;
  long long events_ = 0;
};

}  // namespace harmonia::sim
