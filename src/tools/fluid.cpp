// harmonia-fluid: runs policies of the policy core on a small instance in the fluid model of
// core/lookahead.hpp (the model `auto` forecasts with), from the start to the last phase, and
// prints each phase's times as JSON. `harmonia reproduce optimum` compares these schedules with
// the CP-SAT optimum of the same instance (docs/bakeoff.md, "The optimum").
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/lookahead.hpp"
#include "core/registry.hpp"

namespace {

namespace core = harmonia::core;
using nlohmann::json;

double number(const json& node, const std::string& path, const std::string& key, double min) {
  if (!node.contains(key) || !node.at(key).is_number())
    throw std::invalid_argument(path + key + ": missing or not a number");
  const double x = node.at(key).get<double>();
  if (!(x >= min)) throw std::invalid_argument(path + key + ": must be >= " + std::to_string(min));
  return x;
}

int integer(const json& node, const std::string& path, const std::string& key, int min) {
  if (!node.contains(key) || !node.at(key).is_number_integer() || node.at(key).get<long>() < min)
    throw std::invalid_argument(path + key + ": must be an integer >= " + std::to_string(min));
  return node.at(key).get<int>();
}

/// Registers every application at t = 0 (admitted at once: no admission limit) with its whole
/// list of phases as expected iterations, its first asked at arrival + first compute.
json run(const std::string& policy, const json& instance) {
  const json& device = instance.at("device");
  core::SchedulerConfig cfg(core::DeviceModel::from_slope(
      "buffer", number(device, "device.", "write_bw", 1), number(device, "device.", "read_bw", 1),
      integer(device, "device.", "concurrency", 1), number(device, "device.", "slope", 0)));
  const json& buffers = instance.at("buffers");
  cfg.buffer_count = integer(buffers, "buffers.", "count", 1);
  cfg.buffer_capacity = number(buffers, "buffers.", "capacity", 1);
  cfg.buffer_link_bw = number(buffers, "buffers.", "link_bw", 0);
  cfg.client_node_bw = number(instance, "", "client_bw", 0);
  cfg.max_colocated = integer(instance, "", "max_colocated", 1);
  cfg.min_buffers = integer(instance, "", "min_buffers", 1);
  cfg.flush_threshold = number(instance, "", "flush_threshold", 0);
  cfg.max_running_apps = 0;
  cfg.seed = static_cast<uint64_t>(integer(instance, "", "seed", 0));
  if (instance.contains("auto_objective")) {
    if (!instance.at("auto_objective").is_string())
      throw std::invalid_argument("auto_objective: must be a string");
    cfg.auto_objective = instance.at("auto_objective").get<std::string>();
  }

  struct Quiet : core::Actions {
    void admit(core::AppId) override {}
    void grant(const core::PhaseRequest&, const std::vector<core::BufferId>&) override {}
    void start_prefetch(const core::PhaseRequest&, const std::vector<core::BufferId>&) override {}
    void start_drain(core::BufferId) override {}
    void stop_drain(core::BufferId) override {}
  } quiet;
  auto start = core::make_scheduler(policy, cfg, quiet);
  std::vector<core::ExpectedIteration> phases;
  const json& apps = instance.at("apps");
  for (size_t a = 0; a < apps.size(); ++a) {
    const std::string path = "apps[" + std::to_string(a) + "].";
    core::AppInfo info;
    info.name = apps[a].value("name", "app" + std::to_string(a));
    info.nodes = integer(apps[a], path, "nodes", 1);
    const core::AppId id = start->on_app_register(info, 0);
    const double arrival = number(apps[a], path, "arrival", 0);
    const json& list = apps[a].at("phases");
    if (!list.is_array() || list.empty()) throw std::invalid_argument(path + "phases: empty");
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string at = path + "phases[" + std::to_string(k) + "].";
      const double compute = number(list[k], at, "compute", 0);
      phases.push_back({id, static_cast<int>(k), number(list[k], at, "bytes", 1), core::Op::Write,
                        k == 0 ? arrival + compute : compute, k == 0 ? 0.0 : -1.0});
    }
  }
  const auto forecast = core::Lookahead::forecast(policy, *start, 0, phases, 1000000);
  json out = {{"policy", policy}, {"complete", forecast.complete}, {"phases", json::array()}};
  for (const auto& p : forecast.followed)
    out["phases"].push_back({{"app", p.app},
                             {"index", p.index},
                             {"requested", p.requested},
                             {"granted", p.granted},
                             {"end", p.end},
                             {"io_alone", p.io_alone}});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Run policies on an instance in the policy core's fluid model; JSON on stdout."};
  std::string instance_path;
  std::vector<std::string> policies;
  cli.add_option("instance", instance_path, "Instance JSON (docs/bakeoff.md, The optimum)")
      ->required();
  cli.add_option("--policy", policies, "Policies to run (repeatable)")->required();
  CLI11_PARSE(cli, argc, argv);
  std::ifstream in(instance_path);
  if (!in) {
    std::cerr << "harmonia-fluid: " << instance_path << ": cannot read\n";
    return 2;
  }
  try {
    const json instance = json::parse(in);
    json out = json::array();
    for (const auto& policy : policies) out.push_back(run(policy, instance));
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "harmonia-fluid: " << instance_path << ": " << e.what() << "\n";
    return 2;
  }
  return 0;
}
