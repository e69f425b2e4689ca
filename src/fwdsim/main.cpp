// harmonia-fwdsim: the I/O forwarding layer on SimGrid (docs/forwarding-simulation.md).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/write_atomically.hpp"
#include "fwdsim/simulation.hpp"

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
    std::ifstream in(config_path);
    if (!in) throw std::invalid_argument("cannot read the file");
    config = harmonia::fwdsim::parse_config(nlohmann::json::parse(in));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-fwdsim: %s: %s\n", config_path.c_str(), error.what());
    return 2;
  }
  try {
    // SimGrid reads only its own --cfg options from argv: give it none.
    int sg_argc = 1;
    double wall = 0;
    const auto results = harmonia::fwdsim::simulate(config, sg_argc, argv, wall);
    if (out_path.empty())
      std::cout << results.dump(1) << "\n";
    else
      harmonia::common::write_atomically(out_path, results.dump(1));
    if (!perf_path.empty()) {
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      harmonia::common::write_atomically(
          perf_path, nlohmann::json{{"wall_s", wall}, {"peak_rss_kb", usage.ru_maxrss}}.dump());
    }
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "harmonia-fwdsim: %s: %s\n", config_path.c_str(), error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-fwdsim: %s\n", error.what());
    return 1;
  }
  return 0;
}
