#include "netsim/traffic.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace harmonia::netsim {

double Pacing::next_start(double last_start, double last_end, Rng& rng) const {
  double next = last_end;
  if (interval > 0) next = last_end + interval * rng.uniform(1 - jitter, 1 + jitter);
  if (window > 0) next = std::max(next, last_start + window * rng.uniform(1 - jitter, 1 + jitter));
  return next;
}

double Pacing::first_start(Rng& rng) const {
  const double period = std::max({interval, window, start_spread});
  return period > 0 ? rng.uniform(0, period) : 0.0;
}

std::vector<long> pair_clients(long clients, uint64_t seed) {
  if (clients % 2 != 0) throw std::invalid_argument("MPI pairs need an even number of clients");
  std::vector<long> order(static_cast<size_t>(clients));
  std::iota(order.begin(), order.end(), 0L);
  Rng rng = Rng::stream(seed, "pairs");
  rng.shuffle(order);
  std::vector<long> partner(static_cast<size_t>(clients), -1);
  for (size_t i = 0; i + 1 < order.size(); i += 2) {
    partner[static_cast<size_t>(order[i])] = order[i + 1];
    partner[static_cast<size_t>(order[i + 1])] = order[i];
  }
  return partner;
}

ServerOrder parse_server_order(const std::string& name) {
  if (name == "round-robin") return ServerOrder::RoundRobin;
  if (name == "random") return ServerOrder::Random;
  throw std::invalid_argument("unknown server order '" + name + "' (round-robin, random)");
}

std::string to_string(ServerOrder order) {
  return order == ServerOrder::RoundRobin ? "round-robin" : "random";
}

ServerCycle::ServerCycle(long servers, ServerOrder order, Rng& rng)
    : servers_(servers), order_(order) {
  if (servers < 1) throw std::invalid_argument("I/O clients need at least one server");
  current_ = static_cast<long>(rng.below(static_cast<uint64_t>(servers)));
}

}  // namespace harmonia::netsim
