// harmonia-describe: the names the C++ code registers (policies, coordination strategies and
// flush orders, request schedulers with their options) and the defaults of their settings, as
// JSON. The Python front end builds its lists, checks and help text from this output, so a name
// or a default is written once, here in C++.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/site.hpp"
#include "core/coordination/coordinator.hpp"
#include "core/pricing.hpp"
#include "core/registry.hpp"
#include "core/requests/registry.hpp"
#include "core/scheduler.hpp"

namespace {

nlohmann::ordered_json describe() {
  using nlohmann::ordered_json;
  namespace core = harmonia::core;
  // The device does not matter here: only the settings' defaults are read.
  const core::SchedulerConfig scheduler(core::DeviceModel::from_slope("any", 1, 1, 1, 0));
  const core::coordination::CoordinatorConfig coordination;
  ordered_json out;
  out["policies"] = ordered_json::array();
  for (const auto& name : core::policy_names())
    out["policies"].push_back(
        {{"name", name}, {"family", core::family_name(core::policy_family(name))}});
  out["scheduler_defaults"] = {
      {"if_limit", scheduler.if_limit},
      {"min_buffers", scheduler.min_buffers},
      {"backup_flushers", scheduler.backup_flushers},
      {"priority_tie", scheduler.priority_tie == core::PriorityTie::Share ? "share" : "fcfs"},
  };
  const core::PricingConfig pricing;
  out["pricing_defaults"] = {{"node_hour_rate", pricing.node_hour_rate},
                             {"classes", ordered_json::array()}};
  for (const auto& c : pricing.classes)
    out["pricing_defaults"]["classes"].push_back(
        {{"name", c.name}, {"slowdown", c.slowdown}, {"usage_factor", c.usage_factor}});
  out["coordination"] = {
      {"strategies", core::coordination::coordinator_names()},
      {"flush_orders", core::coordination::flush_order_names()},
      {"defaults",
       {{"window", coordination.window_seconds},
        {"throttle_gap", coordination.throttle_gap},
        {"max_token_seconds", coordination.max_token_seconds}}},
  };
  out["request_schedulers"] = ordered_json::array();
  for (const auto& name : core::requests::request_scheduler_names()) {
    ordered_json options = ordered_json::array();
    for (const auto& spec : core::requests::request_scheduler_options(name)) {
      ordered_json option = {{"name", spec.name}, {"min", spec.min}, {"max", spec.max}};
      if (spec.required)
        option["required"] = true;
      else
        option["default"] = spec.fallback;
      options.push_back(option);
    }
    out["request_schedulers"].push_back({{"name", name}, {"options", options}});
  }
  // The daemons' settings (harmonia.toml, their options and variables), from their one
  // declaration (config/site.cpp).
  harmonia::config::Site site;
  const auto settings = harmonia::config::declare(site, harmonia::config::Names::registered());
  out["settings"] = ordered_json::array();
  for (const auto& setting : settings.all()) {
    const auto& value = setting.value;
    ordered_json entry = {{"key", setting.key},
                          {"flag", setting.flag},
                          {"environment", setting.environment()},
                          {"daemons", ordered_json::array()},
                          {"type", value.type},
                          {"default", value.default_text},
                          {"unit", value.unit},
                          {"help", setting.help}};
    if (setting.daemons & harmonia::common::kSchedd) entry["daemons"].push_back("harmonia-schedd");
    if (setting.daemons & harmonia::common::kNode) entry["daemons"].push_back("harmonia-bbd");
    if (value.min) entry["min"] = *value.min;
    if (value.max) entry["max"] = *value.max;
    if (!value.choices.empty()) entry["choices"] = value.choices;
    if (value.repeatable) entry["repeatable"] = true;
    out["settings"].push_back(entry);
  }
  return out;
}

/// Where this installed program's library, helpers and data are: relative to the program
/// itself (PREFIX/bin/harmonia-describe), so a tree moved or staged elsewhere (DESTDIR, Spack)
/// is still found; the site file's directory is absolute (/etc for the /usr prefix).
nlohmann::ordered_json install_paths() {
  std::error_code error;
  auto prefix = std::filesystem::canonical("/proc/self/exe", error).parent_path();
  for (const auto& part : std::filesystem::path(HARMONIA_BINDIR))
    if (!part.empty()) prefix = prefix.parent_path();
  return {{"bindir", (prefix / HARMONIA_BINDIR).string()},
          {"libdir", (prefix / HARMONIA_LIBDIR).string()},
          {"libexecdir", (prefix / HARMONIA_LIBEXECDIR).string()},
          {"datadir", (prefix / HARMONIA_DATADIR).string()},
          {"sysconfdir", HARMONIA_SYSCONFDIR}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "Print, as JSON, the policies, strategies and request schedulers this build registers "
      "(`harmonia describe` shows them as tables)"};
  bool paths = false;
  cli.add_flag("--paths", paths,
               "Print where this build installs its programs, library, helpers, data and site "
               "file instead (the Python front end finds installed programs from it)");
  CLI11_PARSE(cli, argc, argv);
  if (paths) {
    std::cout << install_paths().dump(1) << "\n";
    return 0;
  }
  std::cout << describe().dump(1) << "\n";
  return 0;
}
