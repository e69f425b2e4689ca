// harmonia-netsim: MPI and I/O traffic of two jobs on a SimGrid fat-tree (one run per process).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "common/write_atomically.hpp"
#include "netsim/config.hpp"
#include "netsim/results.hpp"
#include "netsim/route_check.hpp"
#include "netsim/simulation.hpp"
#include "simkit/engine.hpp"

using harmonia::netsim::Config;
using harmonia::simkit::kBadInput;
using harmonia::simkit::kRunFailed;

int main(int argc, char** argv) {
  CLI::App cli{
      "Simulate MPI and I/O traffic of two jobs on a fat-tree (docs/network-interference.md)"};
  std::string config_path, out_path, perf_path;
  bool check = false;
  long pairs = 200000;
  cli.add_option("--config", config_path, "Normalized run configuration (JSON)")->required();
  cli.add_option("--out", out_path, "Results JSON to write");
  cli.add_option("--perf", perf_path, "Also write wall time, transfers per second and peak memory");
  cli.add_flag("--check-routes", check, "Compare our D-mod-k routes with SimGrid's, then exit");
  cli.add_option("--pairs", pairs, "Node pairs --check-routes compares at most")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(cli, argc, argv);

  std::optional<Config> loaded;
  std::optional<harmonia::netsim::Fabric> fabric;
  std::optional<harmonia::netsim::Layout> layout;
  try {
    loaded = harmonia::netsim::load_config(config_path);
    fabric.emplace(loaded->down, loaded->up);
    const auto servers = harmonia::netsim::place_servers(*fabric, loaded->servers,
                                                         loaded->server_placement, loaded->seed);
    layout = harmonia::netsim::place_jobs(*fabric, servers, loaded->io_fraction,
                                          loaded->job_placement, loaded->seed);
  } catch (const std::exception& e) {
    std::cerr << "harmonia-netsim: " << e.what() << "\n";
    return kBadInput;
  }
  if (!check && out_path.empty()) {
    std::cerr << "harmonia-netsim: --out is required\n";
    return kBadInput;
  }
  const Config& config = *loaded;
  try {
    // Clean fluid max-min sharing, zero link latency (see docs/network-interference.md).
    harmonia::simkit::Engine engine(argv[0]);

    if (check) {
      const auto hosts = harmonia::netsim::build_fabric(*fabric, config.link_bw);
      const auto result = harmonia::netsim::check_routes(*fabric, hosts, pairs, config.seed);
      const nlohmann::ordered_json report = {{"pairs", result.pairs},
                                             {"mismatches", result.mismatches},
                                             {"examples", result.examples}};
      if (!out_path.empty()) harmonia::common::write_atomically(out_path, report.dump(2));
      std::cout << report.dump(2) << "\n";
      return result.mismatches == 0 ? 0 : 1;
    }

    const auto started = std::chrono::steady_clock::now();
    harmonia::netsim::Simulation simulation(config, *fabric, *layout);
    const auto result = simulation.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    harmonia::common::write_atomically(
        out_path, harmonia::netsim::results_json(config, *fabric, *layout, result).dump(1));
    if (!perf_path.empty()) {
      const long transfers = result.mpi.transfers + result.io.transfers;
      harmonia::simkit::write_perf(
          perf_path, wall,
          {{"simulated_s", result.end_time},
           {"transfers", transfers},
           {"transfers_per_s", static_cast<double>(transfers) / std::max(wall, 1e-9)}});
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "harmonia-netsim: " << e.what() << "\n";
    return kRunFailed;
  }
}
