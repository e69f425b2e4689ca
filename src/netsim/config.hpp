#pragma once
/// @file The normalized run configuration (JSON written by `harmonia netsim`, documented in
/// docs/network-interference.md): SI units, every key present.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "netsim/placement.hpp"
#include "netsim/traffic.hpp"

namespace harmonia::netsim {

struct JobConfig {
  bool enabled = false;
  double size = 0;  ///< bytes per message or request
  Pacing pacing;
  long warmup = 0;   ///< transfers per client not recorded
  long samples = 0;  ///< transfers per client recorded after the warm-up
  /// A finite client stops after warmup + samples transfers (a checkpoint of fixed size); an
  /// endless one keeps sending, unrecorded, until the run ends (background traffic).
  bool finite = false;
  /// The run lasts until every client of every measured job has recorded its samples; a job
  /// that is not measured runs in the background (recording samples while the run lasts).
  bool measured = true;
};

/// What the packet model adds to the fabric's shape, bandwidth and hop latency.
struct PacketParams {
  double packet_size = 0;  ///< payload bytes per packet (a TCP segment)
  double window = 0;       ///< bytes a transfer may have unacknowledged in the fabric
  /// Link-level flow control, as InfiniBand's credits: a port sends a packet only while the
  /// buffer at the link's far end has room for it. Off: lossless FIFO ports, no backpressure.
  bool credits = true;
  double port_buffer = 0;  ///< bytes each link's receiving buffer holds (credits only)
};

/// The most header bytes a packet carries on the wire above its payload (IPv4, TCP with
/// options, PPP): a port buffer must hold at least one packet of payload and headers.
constexpr double kPacketHeaderRoom = 100;

/// How transfers share the fabric: SimGrid's fluid max-min model, or ns-3's packets and queues.
enum class NetworkModel { Fluid, Packet };

NetworkModel parse_network_model(const std::string& name);
std::string to_string(NetworkModel model);
/// "credits" (true) or "none" (false).
bool parse_flow_control(const std::string& name);

struct Config {
  std::string name;
  uint64_t seed = 1;
  std::vector<unsigned> down, up;
  double link_bw = 0;      ///< bytes/s of every link, each direction
  double hop_latency = 0;  ///< s per link crossed (fluid: added outside the solver)
  NetworkModel model = NetworkModel::Fluid;
  PacketParams packet;  ///< used by the packet model only
  long servers = 0;
  ServerPlacement server_placement = ServerPlacement::IsolatedTarget;
  ServerOrder server_order = ServerOrder::RoundRobin;
  JobPlacement job_placement = JobPlacement::RandomNode;
  double io_fraction = 0.5;
  JobConfig mpi, io;
  long max_transfers = 0;     ///< stop after this many transfers in all (0: no limit)
  double max_time = 0;        ///< stop at this simulated time (0: no limit)
  bool link_loads = true;     ///< write the per-link load map
  bool keep_samples = false;  ///< write every recorded latency
};

/// Parse and check a normalized configuration; errors name the key ("mpi.size: must be > 0").
Config parse_config(const nlohmann::json& document);
/// Read a file and parse it; errors start with the path.
Config load_config(const std::string& path);

}  // namespace harmonia::netsim
