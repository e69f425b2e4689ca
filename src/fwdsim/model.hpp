#pragma once
/// @file The forwarding-layer model without SimGrid (docs/forwarding-simulation.md): the run's
/// configuration, the requests each access pattern makes, file striping over data servers, and
/// the data servers' disk efficiency. The SimGrid part (simulation.hpp) moves the bytes.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/requests/options.hpp"
#include "core/requests/request_scheduler.hpp"

namespace harmonia::fwdsim {

enum class Pattern { FilePerProcess, SharedContiguous, SharedStrided };

struct AppConfig {
  std::string name;
  int clients = 1;
  Pattern pattern = Pattern::FilePerProcess;
  core::Op op = core::Op::Write;
  std::uint64_t request = 1 << 20;  ///< bytes per request
  int requests = 1;                 ///< per client
  /// Its clients exist (and take their places on the forwarding nodes) but issue nothing: the
  /// "alone" runs keep the other applications' placement this way.
  bool idle = false;
};

struct DiskConfig {
  double peak_bw = 150e6;    ///< bytes/s, one sequential stream of large requests
  double contention = 0.1;   ///< aggregate bandwidth with n streams: peak / (1 + c (n - 1))
  double size_half = 256e3;  ///< a request of this size gets half the bandwidth
};

struct Config {
  std::uint64_t seed = 1;
  double link_bw = 1.25e9;  ///< every host's link to the switch, bytes/s
  int servers = 4;
  int nodes = 2;         ///< forwarding nodes
  int node_threads = 4;  ///< requests a forwarding node has at the servers at once
  std::uint64_t stripe = 1 << 20;
  DiskConfig disk;
  bool forwarding = true;  ///< false: clients talk to the servers themselves
  std::string scheduler = "fifo";
  core::requests::Options options;
  std::vector<AppConfig> apps;
};

/// Reads the normalized JSON; throws simkit::InputError (a std::invalid_argument) naming the key,
/// also for a scheduler name or option that the request scheduler refuses.
Config parse_config(const nlohmann::json& document);

/// The request scheduler's options on forwarding node `node`: the run's, with the node's place
/// among the data servers (TWINS).
core::requests::Options node_options(const Config& config, int node);

/// One request of a client, in the order it issues them.
struct ClientRequest {
  core::requests::FileHandle file;
  std::uint64_t offset;
  std::uint64_t length;
};

/// The requests client `rank` (of `app.clients`) of application `app_index` makes. Files are
/// numbered per application: shared patterns use one file, file-per-process one per client.
std::vector<ClientRequest> client_requests(const AppConfig& app, int app_index, int rank);

/// A file's stripes: stripe k of file f lives on server (f + k) mod servers.
struct Striping {
  std::uint64_t stripe;
  int servers;
  int server_of(core::requests::FileHandle file, std::uint64_t offset) const {
    return static_cast<int>((file + offset / stripe) % static_cast<std::uint64_t>(servers));
  }
  /// Bytes of [offset, offset + length) on each server it touches.
  std::map<int, std::uint64_t> split(core::requests::FileHandle file, std::uint64_t offset,
                                     std::uint64_t length) const;
};

/// Aggregate bandwidth of a disk with `streams` concurrent requests.
double disk_capacity(const DiskConfig& disk, int streams);
/// The disk as a device model: disk_capacity's curve, exact for up to `streams` concurrent
/// requests (a data server never sees more than the run's clients).
core::DeviceModel disk_device(const DiskConfig& disk, int streams);
/// The share of the disk's bandwidth a request of `bytes` can use.
double size_efficiency(const DiskConfig& disk, double bytes);

}  // namespace harmonia::fwdsim
