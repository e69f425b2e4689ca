#pragma once
/// @file The SimGrid platform of a scenario (simkit's builder): compute nodes, buffer nodes and
/// PFS servers as leaves of one fat-tree zone (a single switch is a one-level fat-tree), with
/// disks whose aggregate bandwidth follows the device curve.

#include <simgrid/s4u.hpp>
#include <vector>

#include "sim/scenario.hpp"

namespace harmonia::sim {

struct PlatformHosts {
  std::vector<simgrid::s4u::Host*> compute;
  std::vector<simgrid::s4u::Host*> buffers;
  std::vector<simgrid::s4u::Host*> pfs;
  std::vector<simgrid::s4u::Disk*> buffer_disks;
  std::vector<simgrid::s4u::Disk*> pfs_disks;
};

/// Must be called once, before the simulation starts.
PlatformHosts build_platform(const Scenario& scenario);

}  // namespace harmonia::sim
