#pragma once
/// @file The SimGrid part: the fat-tree platform and one actor per client. Everything else
/// (routes, placement, pacing, statistics) is plain C++ that this file calls.

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <vector>

#include "netsim/config.hpp"
#include "netsim/fabric.hpp"
#include "netsim/placement.hpp"
#include "netsim/results.hpp"

namespace harmonia::netsim {

/// Build the SimGrid fat-tree of `fabric` (zero link latency, SPLITDUPLEX links of `link_bw`)
/// with one host per node, named "node-<position>", and return the hosts by position. Needs an
/// engine and may be called once per process.
std::vector<simgrid::s4u::Host*> build_fabric(const Fabric& fabric, double link_bw);

/// The fabric of `config.model`: build_fabric, or the packet-level one (packet_network.hpp).
std::vector<simgrid::s4u::Host*> build_network(const Config& config, const Fabric& fabric);

class Simulation {
 public:
  /// Builds the platform (see build_fabric): one simulation per process.
  Simulation(const Config& config, const Fabric& fabric, const Layout& layout);
  RunResult run();

 private:
  void run_client(Traffic traffic, long index);
  void stop(const char* reason);
  /// Sleeps the calling client (its slot in wake_timers_) until `date`. The packet model sleeps
  /// on a kernel timer: it moves the clock by ns-3's steps, which can end a little past the date
  /// SimGrid asked for, and a CPU sleep (sleep_until) whose date the clock has passed never
  /// ends, nor any CPU sleep after it; a timer fires once its date is past.
  void sleep_client_until(size_t slot, double date);
  /// Packet model: the date of a timer meant for `date`, on ns-3's nanosecond grid.
  double timer_date(double date) const;
  /// Removes the timers still pending (the clients asleep, the run's time limit).
  void cancel_timers();

  const Config& config_;
  const Fabric& fabric_;
  const Layout& layout_;
  std::vector<simgrid::s4u::Host*> hosts_;
  std::vector<long> partner_;  // MPI client -> partner client
  RunResult result_;
  long clients_waited_ = 0;  // clients that have not completed their quota yet
  /// By client, MPI ones first: the timer that ends its sleep (null: awake).
  std::vector<simgrid::kernel::timer::Timer*> wake_timers_;
  simgrid::kernel::timer::Timer* limit_timer_ = nullptr;  ///< the run's max_time
  bool stopping_ = false;
  simgrid::s4u::SemaphorePtr done_;
};

}  // namespace harmonia::netsim
