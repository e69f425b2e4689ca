// harmonia-sim: run one scheduling policy on one normalized scenario in SimGrid.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "common/accounting.hpp"
#include "common/write_atomically.hpp"
#include "core/registry.hpp"
#include "sim/results.hpp"
#include "simkit/engine.hpp"

using harmonia::simkit::kBadInput;
using harmonia::simkit::kRunFailed;

int main(int argc, char** argv) {
  CLI::App cli{"Run one Harmonia scheduling policy on a normalized scenario (docs/formats.md)"};
  std::string scenario_path, policy, out_path, perf_path, accounting_prefix;
  bool list = false;
  cli.add_flag("--list-policies", list, "Print the policy names and exit");
  cli.add_option("--scenario", scenario_path, "Normalized scenario JSON");
  cli.add_option("--policy", policy, "Policy name");
  cli.add_option("--out", out_path, "Results JSON to write");
  cli.add_option("--perf", perf_path, "Also write wall time, events and peak memory here");
  cli.add_option("--accounting", accounting_prefix,
                 "Also write one accounting record per job to PREFIX.json and PREFIX.csv");
  harmonia::sim::ControlConfig control;
  cli.add_option("--ranks-per-node", control.ranks_per_node,
                 "Model the control plane with this many ranks per node (default 0: not modelled)")
      ->check(CLI::Range(0, 1 << 16));
  cli.add_option("--agent-ranks", control.agent_ranks,
                 "Ranks one connection to the scheduler speaks for (1: every rank; 64: one node "
                 "agent per 64 ranks)")
      ->check(CLI::Range(1, 1 << 20));
  cli.add_option("--message-seconds", control.message_seconds,
                 "The scheduler's time per message (default 5e-6, harmonia-schedd's measured)")
      ->check(CLI::Range(0.0, 1.0));
  cli.add_option("--arrival-jitter", control.arrival_jitter,
                 "Ranks reach a phase up to this many seconds apart (default 0.02)")
      ->check(CLI::Range(0.0, 60.0));
  harmonia::sim::ProgressConfig progress;
  cli.add_option("--progress", progress.every_seconds,
                 "Every this many wall seconds, print the simulated time, the jobs done, the rate "
                 "and the time left to stderr (default 0: never)")
      ->check(CLI::Range(0.0, 86400.0));
  CLI11_PARSE(cli, argc, argv);
  progress.out = &std::cerr;

  if (list) {
    for (const auto& name : harmonia::core::policy_names()) std::cout << name << "\n";
    return 0;
  }
  if (scenario_path.empty() || policy.empty() || out_path.empty()) {
    std::cerr << "harmonia-sim: --scenario, --policy and --out are required\n";
    return kBadInput;
  }
  const auto names = harmonia::core::policy_names();
  if (std::find(names.begin(), names.end(), policy) == names.end()) {
    std::cerr << "harmonia-sim: --policy: unknown policy '" << policy << "'\n";
    return kBadInput;
  }
  std::optional<harmonia::sim::Scenario> loaded;
  try {
    loaded = harmonia::sim::load_scenario(scenario_path);
  } catch (const std::exception& e) {
    std::cerr << "harmonia-sim: " << e.what() << "\n";
    return kBadInput;
  }
  const auto& scenario = *loaded;
  try {
    harmonia::simkit::Engine engine(argv[0]);
    const auto started = std::chrono::steady_clock::now();
    harmonia::sim::Simulation simulation(scenario, policy, control, progress);
    const auto result = simulation.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    harmonia::common::write_atomically(out_path, [&](std::ostream& out) {
      harmonia::sim::write_results(out, scenario, policy, result);
    });
    if (!accounting_prefix.empty())
      harmonia::common::write_accounting(accounting_prefix, result.accounting);
    if (!perf_path.empty())
      harmonia::simkit::write_perf(
          perf_path, wall,
          {{"events", result.events},
           {"events_per_s", static_cast<double>(result.events) / std::max(wall, 1e-9)}});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "harmonia-sim: " << e.what() << "\n";
    return kRunFailed;
  }
}
