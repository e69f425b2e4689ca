#pragma once
/// @file Bytes carried by every directed link of the fabric, per traffic type: the load map.

#include <vector>

#include "netsim/fabric.hpp"

namespace harmonia::netsim {

enum class Traffic { Mpi, Io };

class LinkLoad {
 public:
  explicit LinkLoad(const Fabric& fabric)
      : mpi_(static_cast<size_t>(fabric.link_count()), 0.0),
        io_(static_cast<size_t>(fabric.link_count()), 0.0) {}

  /// Count `bytes` on every link of `route`.
  void add(Traffic traffic, const std::vector<Hop>& route, double bytes) {
    auto& totals = traffic == Traffic::Mpi ? mpi_ : io_;
    for (const Hop& hop : route) totals[static_cast<size_t>(Fabric::link_index(hop))] += bytes;
  }
  /// Bytes per directed link, indexed by Fabric::link_index.
  const std::vector<double>& bytes(Traffic traffic) const {
    return traffic == Traffic::Mpi ? mpi_ : io_;
  }

 private:
  std::vector<double> mpi_, io_;
};

}  // namespace harmonia::netsim
