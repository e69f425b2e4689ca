#pragma once
/// @file Where the I/O servers, the I/O job and the MPI job sit on the fabric (paper sections 3.1,
/// 5.1 and 5.2). Plain functions of the fabric, the options and a seed.

#include <cstdint>
#include <string>
#include <vector>

#include "netsim/fabric.hpp"

namespace harmonia::netsim {

enum class ServerPlacement {
  /// Servers fill whole leaf switches reserved for them, spread over the pods (paper default).
  IsolatedTarget,
  /// One server per leaf switch, on its last port (the paper's "port 18"), round-robin.
  SpreadTarget,
  /// Servers on distinct nodes drawn at random.
  RandomTarget,
};

enum class JobPlacement {
  /// Compute nodes are dealt to the jobs at random.
  RandomNode,
  /// Whole leaf switches are dealt to the jobs at random (at most one leaf is split).
  RandomSwitch,
};

ServerPlacement parse_server_placement(const std::string& name);
JobPlacement parse_job_placement(const std::string& name);
std::string to_string(ServerPlacement placement);
std::string to_string(JobPlacement placement);

enum class Role : uint8_t { Idle, Server, Io, Mpi };

/// Which node does what. Node lists are in increasing node order.
struct Layout {
  std::vector<long> servers;
  std::vector<long> io_clients;
  std::vector<long> mpi_clients;
  std::vector<Role> roles;  ///< per node
};

/// `count` server nodes, in increasing node order (the order I/O clients go round-robin in).
/// Throws std::invalid_argument if they do not fit on the fabric with a node left for the jobs.
std::vector<long> place_servers(const Fabric& fabric, long count, ServerPlacement placement,
                                uint64_t seed);

/// Deal every non-server node to the I/O job (round(io_fraction * compute nodes) of them) or the
/// MPI job. If the MPI job gets an odd number of nodes, its last node stays idle (pairs need two).
Layout place_jobs(const Fabric& fabric, const std::vector<long>& servers, double io_fraction,
                  JobPlacement placement, uint64_t seed);

}  // namespace harmonia::netsim
