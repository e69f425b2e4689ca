// harmonia-fwdsim: the I/O forwarding layer on SimGrid (docs/forwarding-simulation.md).
#include <CLI/CLI.hpp>
#include <iostream>

#include "common/write_atomically.hpp"
#include "fwdsim/simulation.hpp"
#include "simkit/engine.hpp"
#include "simkit/json_reader.hpp"

using harmonia::simkit::kBadInput;
using harmonia::simkit::kRunFailed;

int main(int argc, char** argv) {
  CLI::App cli{
      "Simulate clients, I/O forwarding nodes and data servers (docs/forwarding-simulation.md)"};
  std::string config_path, out_path, perf_path;
  cli.add_option("--config", config_path, "Normalized run configuration (JSON)")->required();
  cli.add_option("--out", out_path, "Results JSON to write (default: stdout)");
  cli.add_option("--perf", perf_path, "Also write wall time and peak memory");
  CLI11_PARSE(cli, argc, argv);

  harmonia::fwdsim::Config config;
  try {
    config = harmonia::simkit::load_with(config_path, harmonia::fwdsim::parse_config);
  } catch (const harmonia::simkit::InputError& error) {
    std::cerr << "harmonia-fwdsim: " << error.what() << "\n";
    return kBadInput;
  }
  try {
    harmonia::simkit::Engine engine(argv[0]);
    double wall = 0;
    const auto results = harmonia::fwdsim::simulate(config, wall);
    if (out_path.empty())
      std::cout << results.dump(1) << "\n";
    else
      harmonia::common::write_atomically(out_path, results.dump(1));
    if (!perf_path.empty()) harmonia::simkit::write_perf(perf_path, wall, {});
  } catch (const std::exception& error) {
    std::cerr << "harmonia-fwdsim: " << error.what() << "\n";
    return kRunFailed;
  }
  return 0;
}
