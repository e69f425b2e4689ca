#pragma once
/// @file The one platform builder of the simulators: hosts as the leaves of a SimGrid fat-tree
/// zone (a switch is a one-level fat-tree), and disks whose concurrent activities share a
/// core::DeviceModel's aggregate curve through SimGrid's NONLINEAR sharing.

#include <functional>
#include <optional>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "simkit/fat_tree.hpp"

namespace harmonia::simkit {

/// Hosts named "<prefix>-<i>", i from 0.
struct HostGroup {
  std::string prefix;
  long count = 0;
};

struct Network {
  /// None: one switch with a port per host.
  std::optional<FatTree> tree;
  double link_bw = 0;  ///< bytes/s of every link, each direction (SPLITDUPLEX)
  double link_latency = 0;
};

/// Builds the network: the groups take the leaves in order, leaves left over are hosts named
/// "spare-<leaf>". Returns each group's hosts. Needs the engine; once per process.
std::vector<std::vector<simgrid::s4u::Host*>> build_network(const Network& network,
                                                            const std::vector<HostGroup>& groups);

/// The share of a disk's bandwidth that one request of `bytes` can use, in (0, 1].
using RequestEfficiency = std::function<double(double bytes)>;

/// Attaches a disk to `host` whose concurrent reads and writes share `device`'s aggregate curve,
/// each request slowed down by `request_efficiency` when given.
simgrid::s4u::Disk* create_disk(simgrid::s4u::Host* host, const std::string& name,
                                const core::DeviceModel& device,
                                const RequestEfficiency& request_efficiency = {});

}  // namespace harmonia::simkit
