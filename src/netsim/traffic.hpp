#pragma once
/// @file The synthetic traffic of the two jobs (paper section 3.2): who sends to whom, and when.
/// Plain functions; the simulator asks them for each next transfer.

#include <cstdint>
#include <string>
#include <vector>

#include "netsim/random.hpp"

namespace harmonia::netsim {

/// When a client starts its transfers. `interval` is the gap between the completion of one
/// transfer and the start of the next; `window` the least time between two starts (the paper's
/// throttle window). Both are scaled by a factor drawn uniformly in [1 - jitter, 1 + jitter] each
/// time (the paper's +/-5 % noise).
struct Pacing {
  double interval = 0;
  double window = 0;
  double jitter = 0.05;
  /// First starts are spread over at least this long (0: checkpoint traffic starts at once).
  double start_spread = 0;

  /// Start of the next transfer after one that started at `last_start` and ended at `last_end`.
  double next_start(double last_start, double last_end, Rng& rng) const;
  /// Start of a client's first transfer: uniform in [0, max(interval, window, start_spread)), so
  /// that a periodic job is in its steady state from the beginning; 0 for checkpoint-style
  /// traffic without a start spread.
  double first_start(Rng& rng) const;
};

/// A random perfect matching of `clients` MPI processes: partner[i] is i's partner, and
/// partner[partner[i]] == i. Needs an even count.
std::vector<long> pair_clients(long clients, uint64_t seed);

enum class ServerOrder {
  /// A random first server, then round-robin in server order (the paper's Lustre pattern).
  RoundRobin,
  /// Every request to a server drawn at random (a comparison, not in the paper).
  Random,
};

ServerOrder parse_server_order(const std::string& name);
std::string to_string(ServerOrder order);

/// The servers an I/O client writes to, one request after the other.
class ServerCycle {
 public:
  ServerCycle(long servers, ServerOrder order, Rng& rng);
  /// Index (into the server list) of the next request's server.
  long next(Rng& rng) {
    if (order_ == ServerOrder::Random)
      return static_cast<long>(rng.below(static_cast<uint64_t>(servers_)));
    const long s = current_;
    current_ = (current_ + 1) % servers_;
    return s;
  }

 private:
  long servers_;
  ServerOrder order_;
  long current_;
};

}  // namespace harmonia::netsim
