#include "sim/platform.hpp"

#include "simkit/platform.hpp"

namespace harmonia::sim {

PlatformHosts build_platform(const Scenario& s) {
  const auto& p = s.platform;
  // A fat-tree's leaf count was checked against the hosts when the scenario was read.
  simkit::Network network;
  if (p.fat_tree) network.tree = p.tree;
  network.link_bw = p.link_bw;
  network.link_latency = p.link_latency;
  auto groups = simkit::build_network(
      network,
      {{"compute", p.compute_nodes}, {"buffer", s.scheduler.buffer_count}, {"pfs", s.pfs_servers}});

  PlatformHosts hosts{std::move(groups[0]), std::move(groups[1]), std::move(groups[2]), {}, {}};
  for (auto* h : hosts.buffers)
    hosts.buffer_disks.push_back(simkit::create_disk(h, "bb-disk", s.scheduler.buffer_device));
  for (auto* h : hosts.pfs)
    hosts.pfs_disks.push_back(simkit::create_disk(h, "pfs-disk", s.pfs_device));
  return hosts;
}

}  // namespace harmonia::sim
