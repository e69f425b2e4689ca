#include "netsim/placement.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "netsim/random.hpp"

namespace harmonia::netsim {

ServerPlacement parse_server_placement(const std::string& name) {
  if (name == "isolated-target") return ServerPlacement::IsolatedTarget;
  if (name == "spread-target") return ServerPlacement::SpreadTarget;
  if (name == "random-target") return ServerPlacement::RandomTarget;
  throw std::invalid_argument("unknown server placement '" + name +
                              "' (isolated-target, spread-target, random-target)");
}

JobPlacement parse_job_placement(const std::string& name) {
  if (name == "random-node") return JobPlacement::RandomNode;
  if (name == "random-switch") return JobPlacement::RandomSwitch;
  throw std::invalid_argument("unknown job placement '" + name + "' (random-node, random-switch)");
}

std::string to_string(ServerPlacement p) {
  switch (p) {
    case ServerPlacement::IsolatedTarget:
      return "isolated-target";
    case ServerPlacement::SpreadTarget:
      return "spread-target";
    case ServerPlacement::RandomTarget:
      return "random-target";
  }
  return "?";
}

std::string to_string(JobPlacement p) {
  return p == JobPlacement::RandomNode ? "random-node" : "random-switch";
}

namespace {

std::vector<long> isolated_target(const Fabric& f, long count) {
  // Reserved leaves are taken one per pod in turn, from the last leaf of each pod backwards, so
  // that four server leaves on a four-pod tree sit two in each half (paper section 3.1).
  const long size = f.leaf_size();
  const long leaves_needed = (count + size - 1) / size;
  if (leaves_needed > f.leaves())
    throw std::invalid_argument("isolated-target: " + std::to_string(count) +
                                " servers need more leaves than the fabric has");
  std::vector<long> servers;
  for (long i = 0; i < leaves_needed; ++i) {
    const long pod = i % f.pods();
    const long in_pod = f.pod_size() - 1 - i / f.pods();
    const long leaf = pod * f.pod_size() + in_pod;
    for (long port = 0; port < size && static_cast<long>(servers.size()) < count; ++port)
      servers.push_back(leaf * size + port);
  }
  return servers;
}

std::vector<long> spread_target(const Fabric& f, long count) {
  // Round-robin over the leaves, on the last port first (the paper's port 18), then the one
  // before it.
  const long size = f.leaf_size();
  if (count > f.nodes()) throw std::invalid_argument("spread-target: more servers than nodes");
  std::vector<long> servers;
  for (long i = 0; i < count; ++i) {
    const long leaf = i % f.leaves();
    const long port = size - 1 - i / f.leaves();
    servers.push_back(leaf * size + port);
  }
  return servers;
}

std::vector<long> random_target(const Fabric& f, long count, uint64_t seed) {
  if (count > f.nodes()) throw std::invalid_argument("random-target: more servers than nodes");
  Rng rng = Rng::stream(seed, "servers");
  std::vector<long> nodes(static_cast<size_t>(f.nodes()));
  for (long n = 0; n < f.nodes(); ++n) nodes[static_cast<size_t>(n)] = n;
  // Partial Fisher-Yates: the first `count` entries are a uniform random subset.
  for (long i = 0; i < count; ++i) {
    const auto j = static_cast<size_t>(i) + rng.below(static_cast<uint64_t>(f.nodes() - i));
    std::swap(nodes[static_cast<size_t>(i)], nodes[j]);
  }
  nodes.resize(static_cast<size_t>(count));
  return nodes;
}

}  // namespace

std::vector<long> place_servers(const Fabric& fabric, long count, ServerPlacement placement,
                                uint64_t seed) {
  if (count < 1) throw std::invalid_argument("servers: need at least one");
  if (count >= fabric.nodes()) throw std::invalid_argument("servers: no node left for the jobs");
  std::vector<long> servers;
  switch (placement) {
    case ServerPlacement::IsolatedTarget:
      servers = isolated_target(fabric, count);
      break;
    case ServerPlacement::SpreadTarget:
      servers = spread_target(fabric, count);
      break;
    case ServerPlacement::RandomTarget:
      servers = random_target(fabric, count, seed);
      break;
  }
  std::sort(servers.begin(), servers.end());
  return servers;
}

Layout place_jobs(const Fabric& fabric, const std::vector<long>& servers, double io_fraction,
                  JobPlacement placement, uint64_t seed) {
  if (!(io_fraction >= 0 && io_fraction <= 1))
    throw std::invalid_argument("io_fraction must be in [0, 1]");
  Layout layout;
  layout.servers = servers;
  layout.roles.assign(static_cast<size_t>(fabric.nodes()), Role::Idle);
  for (long s : servers) layout.roles.at(static_cast<size_t>(s)) = Role::Server;

  std::vector<long> compute;  // in the order nodes are dealt
  Rng rng = Rng::stream(seed, "jobs");
  if (placement == JobPlacement::RandomNode) {
    for (long n = 0; n < fabric.nodes(); ++n)
      if (layout.roles[static_cast<size_t>(n)] != Role::Server) compute.push_back(n);
    rng.shuffle(compute);
  } else {
    std::vector<long> leaves;
    for (long leaf = 0; leaf < fabric.leaves(); ++leaf) leaves.push_back(leaf);
    rng.shuffle(leaves);
    for (long leaf : leaves)
      for (int port = 0; port < fabric.leaf_size(); ++port) {
        const long n = leaf * fabric.leaf_size() + port;
        if (layout.roles[static_cast<size_t>(n)] != Role::Server) compute.push_back(n);
      }
  }
  const auto io_count =
      static_cast<size_t>(std::llround(io_fraction * static_cast<double>(compute.size())));
  size_t mpi_count = compute.size() - io_count;
  mpi_count -= mpi_count % 2;
  for (size_t i = 0; i < compute.size(); ++i) {
    const long n = compute[i];
    if (i < io_count) {
      layout.io_clients.push_back(n);
      layout.roles[static_cast<size_t>(n)] = Role::Io;
    } else if (i < io_count + mpi_count) {
      layout.mpi_clients.push_back(n);
      layout.roles[static_cast<size_t>(n)] = Role::Mpi;
    }
  }
  std::sort(layout.io_clients.begin(), layout.io_clients.end());
  std::sort(layout.mpi_clients.begin(), layout.mpi_clients.end());
  return layout;
}

}  // namespace harmonia::netsim
