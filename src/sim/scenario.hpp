#pragma once
/// @file The normalized scenario (docs/formats.md section 2) as C++ values.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/pricing.hpp"
#include "core/scheduler.hpp"
#include "simkit/fat_tree.hpp"
#include "simkit/json_reader.hpp"

namespace harmonia::sim {

struct Platform {
  bool fat_tree = false;
  simkit::FatTree tree;
  double link_bw = 0;
  double link_latency = 0;
  int compute_nodes = 0;
  /// The jobs share the compute nodes: each waits in the batch queue until nodes are free for it
  /// (false: every job has nodes of its own, and they must all fit).
  bool shared = false;
};

struct PhaseSpec {
  double compute = 0;
  double bytes = 0;
  core::Op op = core::Op::Write;
  int priority = 0;
  int source_phase = -1;  ///< read phases: the earlier write phase it reads back; -1: the PFS
};

struct AppSpec {
  std::string name;
  int nodes = 1;
  double arrival = 0;
  int priority = 0;
  core::Hint hint = core::Hint::Flushable;
  std::string user;        ///< empty: the application is its own user
  double walltime = 0;     ///< requested time limit; 0: none
  double reservation = 0;  ///< the DataWarp reservation; 0: the total of its phases
  bool write_only = false;
  int ranks = 1;                  ///< processes (the accounting's NCPUS)
  std::string io_qos = "normal";  ///< its I/O service class (core/pricing.hpp)
  double io_slowdown = 1;         ///< the slowdown that class accepts
  std::vector<PhaseSpec> phases;

  double total_bytes() const;
  /// What the job reserves under DataWarp: `reservation`, else the total of its phases.
  double reserved_bytes() const;
};

struct Scenario {
  std::string name;
  uint64_t seed = 1;
  Platform platform;
  core::SchedulerConfig scheduler;  // buffer device, counts, capacities, X, Y, ...
  core::DeviceModel pfs_device;
  int pfs_servers = 1;
  std::vector<AppSpec> apps;
  core::PricingConfig pricing{};  ///< the `pricing` table; defaults: core/pricing.hpp
  /// Read phases are announced when the computation before them begins (their data may be staged
  /// in meanwhile); false: only when requested.
  bool prefetch_ahead = true;
};

/// Reads a normalized scenario; throws simkit::InputError naming the key on bad input.
Scenario parse_scenario(const nlohmann::json& document);
/// The same from a file; errors start with its path.
Scenario load_scenario(const std::string& path);

}  // namespace harmonia::sim
