#pragma once
/// @file The control plane in the simulator (docs/node-agent.md, "In the simulator"): the
/// messages between the ranks of each application and the scheduler, with or without node
/// agents. Each application has `nodes * ranks_per_node` ranks; on each node, every
/// `agent_ranks` of them share one connection to the scheduler (1: every rank speaks for itself,
/// as without node agents; 64: the paper's one agent per 64 ranks). Per phase, each connection
/// sends PhaseBegin when the first of its ranks reaches the phase (ranks arrive up to
/// `arrival_jitter` apart), gets a reply, gets the grant pushed, and sends PhaseEnd. Every message
/// crosses the network between its rank's node and the scheduler's host, and the scheduler handles
/// one message at a time, `message_seconds` each (its measured cost per request). The phase reaches
/// the policy when its first PhaseBegin is handled, and its data moves once every connection holds
/// the grant.

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

namespace harmonia::sim {

struct ControlConfig {
  int ranks_per_node = 0;  ///< 0: no control plane modelled (phases reach the policy at once)
  int agent_ranks = 1;
  double message_seconds = 5e-6;
  double message_bytes = 128;
  double arrival_jitter = 0.02;
  double heartbeat_seconds = 0.25;  ///< a silent connection's heartbeat period
};

/// One phase's control traffic.
struct PhaseControl {
  int app = 0;
  int index = 0;
  int connections = 0;
  long long messages = 0;    ///< to and from the scheduler, heartbeats aside
  double first_arrival = 0;  ///< the first rank reaching the phase
  double all_granted = 0;    ///< the last connection holding the grant
  double overhead = 0;       ///< the part of that due to messages (not the policy's wait)
};

class ControlPlane {
 public:
  ControlPlane(ControlConfig config, simgrid::s4u::Host* scheduler, std::uint64_t seed);

  bool enabled() const { return config_.ranks_per_node > 0; }
  /// The connections of an application on `nodes` nodes.
  int connections(int nodes) const;
  /// The connections of one node: its ranks in groups of at most `agent_ranks`.
  int per_node() const;
  /// The phase begins: returns once the scheduler handled its first PhaseBegin, after calling
  /// `request` (the policy sees the phase then). The connections' actors live on.
  void phase_begin(int app, int index, const std::vector<simgrid::s4u::Host*>& nodes,
                   const std::function<void()>& request);
  /// The phase was granted: returns once every connection holds the grant.
  void granted(int app, int index, const std::vector<simgrid::s4u::Host*>& nodes);
  /// The phase's I/O is done: returns once the scheduler handled its last PhaseEnd, after
  /// calling `complete`.
  void phase_end(int app, int index, const std::vector<simgrid::s4u::Host*>& nodes,
                 const std::function<void()>& complete);
  /// An application's connections lived `seconds`: the heartbeats they would send at most.
  void lived(int nodes, double seconds);

  const std::vector<PhaseControl>& phases() const { return phases_; }
  long long heartbeats() const { return heartbeats_; }

 private:
  /// The scheduler handles one message (FIFO, `message_seconds`).
  void handle();
  /// One message from `node` to the scheduler, or back.
  void cross(simgrid::s4u::Host* from, simgrid::s4u::Host* to);
  simgrid::s4u::Host* node_of(const std::vector<simgrid::s4u::Host*>& nodes, int connection) const;
  /// The record of the application's phase (made on first use). Indices, not references: other
  /// applications' phases are added while an actor waits.
  size_t slot(int app, int index);

  ControlConfig config_;
  simgrid::s4u::Host* scheduler_;
  simgrid::s4u::MutexPtr busy_;
  std::mt19937_64 random_;
  std::vector<PhaseControl> phases_;
  std::map<std::pair<int, int>, size_t> slots_;  ///< (app, phase) -> record
  std::vector<double> handled_at_;  ///< per record: when its first PhaseBegin was handled
  std::vector<double> granted_at_;  ///< per record: when the policy granted it
  long long heartbeats_ = 0;
};

}  // namespace harmonia::sim
