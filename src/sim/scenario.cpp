#include "sim/scenario.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "core/lookahead.hpp"
#include "core/policies/auto.hpp"
#include "core/registry.hpp"

namespace harmonia::sim {

using nlohmann::json;
using simkit::InputError;

namespace {

using simkit::Reader;

core::DeviceModel parse_device(const Reader& devices, const std::string& name) {
  if (!devices.has(name)) devices.fail(name, "device used but not defined");
  const Reader d = devices.child(name);
  const double w = d.number("write_bw", 0, false);
  const double r = d.number("read_bw", 0, false);
  const int c = d.int32("concurrency", 1);
  std::vector<std::pair<int, double>> points;
  const bool curve = d.has("curve");
  if (curve) {
    if (!d.at("curve").is_array()) d.fail("curve", "must be a list");
    for (const auto& p : d.at("curve")) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number())
        d.fail("curve", "entries must be [n, fraction]");
      points.emplace_back(p[0].get<int>(), p[1].get<double>());
    }
  }
  const double slope = curve ? 0.0 : d.number("interference_slope", 0);
  try {
    return curve ? core::DeviceModel::from_curve(name, w, r, c, points)
                 : core::DeviceModel::from_slope(name, w, r, c, slope);
  } catch (const std::invalid_argument& e) {  // the model's own checks of the curve
    throw InputError(d.path() + ": " + e.what());
  }
}

core::Op parse_op(const Reader& r, const std::string& key) {
  const auto s = r.string(key);
  if (s == "write") return core::Op::Write;
  if (s == "read") return core::Op::Read;
  r.fail(key, "must be \"write\" or \"read\"");
}

core::PricingConfig parse_pricing(const Reader& pricing) {
  core::PricingConfig out;
  if (pricing.has("node_hour_rate")) out.node_hour_rate = pricing.number("node_hour_rate", 0);
  if (pricing.has("classes")) {
    out.classes.clear();
    for (const Reader& c : pricing.objects("classes")) {
      core::IoClass io_class{c.string("name"), c.number("slowdown", 1),
                             c.number("usage_factor", 0)};
      for (const auto& seen : out.classes)
        if (seen.name == io_class.name) c.fail("name", "\"" + io_class.name + "\" defined twice");
      out.classes.push_back(std::move(io_class));
    }
  }
  try {
    out.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  return out;
}

}  // namespace

double AppSpec::total_bytes() const {
  double total = 0;
  for (const auto& p : phases) total += p.bytes;
  return total;
}

double AppSpec::reserved_bytes() const { return reservation > 0 ? reservation : total_bytes(); }

Scenario parse_scenario(const json& doc) {
  const simkit::Document document(doc);
  try {
    const Reader root = document.root();
    const Reader devices = root.child("devices");
    const Reader platform = root.child("platform");
    const Reader buffers = root.child("buffers");
    const Reader pfs = root.child("pfs");
    const Reader sched = root.child("scheduler");

    Platform plat;
    const auto network = platform.string("network");
    if (network != "switch" && network != "fat-tree")
      platform.fail("network", "must be \"switch\" or \"fat-tree\"");
    plat.fat_tree = network == "fat-tree";
    plat.link_bw = platform.number("link_bw", 0, false);
    plat.link_latency = platform.has("link_latency") ? platform.number("link_latency", 0) : 0.0;
    plat.compute_nodes = platform.int32("compute_nodes", 1);
    if (platform.has("shared")) plat.shared = platform.boolean("shared");
    if (plat.fat_tree) {
      const Reader ft = platform.child("fat_tree");
      plat.tree.levels = static_cast<unsigned>(ft.int32("levels", 1));
      plat.tree.down = ft.counts("down", std::numeric_limits<unsigned>::max());
      plat.tree.up = ft.counts("up", std::numeric_limits<unsigned>::max());
      plat.tree.link_count = ft.counts("link_count", std::numeric_limits<unsigned>::max());
      for (const auto* list : {&plat.tree.down, &plat.tree.up, &plat.tree.link_count})
        if (list->size() != plat.tree.levels)
          ft.fail("levels", "down, up and link_count must each have `levels` entries");
    }

    core::SchedulerConfig cfg(parse_device(devices, buffers.string("device")));
    if (plat.shared) cfg.compute_nodes = plat.compute_nodes;
    cfg.buffer_count = buffers.int32("count", 1);
    cfg.buffer_capacity = buffers.number("capacity", 0, false);
    cfg.flush_threshold = buffers.has("flush_threshold") ? buffers.number("flush_threshold", 0) : 0;
    if (cfg.flush_threshold > 1) buffers.fail("flush_threshold", "must be <= 1");
    cfg.backup_flushers = buffers.has("backup_flushers") ? buffers.int32("backup_flushers", 0) : 0;
    if (cfg.backup_flushers >= cfg.buffer_count) buffers.fail("backup_flushers", "must be < count");
    cfg.buffer_link_bw = plat.link_bw;
    cfg.client_node_bw = plat.link_bw;
    if (sched.has("max_colocated")) cfg.max_colocated = sched.int32("max_colocated", 1);
    if (sched.has("max_running_apps")) cfg.max_running_apps = sched.int32("max_running_apps", 0);
    cfg.if_limit = sched.has("if_limit") ? sched.number("if_limit", 1, false) : 5.0;
    cfg.min_buffers = sched.has("min_buffers") ? sched.int32("min_buffers", 1) : 1;
    if (cfg.min_buffers > cfg.buffer_count) sched.fail("min_buffers", "must be <= buffers.count");
    if (sched.has("priority_tie")) {
      const auto tie = sched.string("priority_tie");
      if (tie != "share" && tie != "fcfs") sched.fail("priority_tie", "must be share or fcfs");
      cfg.priority_tie = tie == "share" ? core::PriorityTie::Share : core::PriorityTie::Fcfs;
    }
    if (sched.has("extend_reservations"))
      cfg.extend_reservations = sched.boolean("extend_reservations");
    if (sched.has("lend_write_only")) cfg.lend_write_only = sched.boolean("lend_write_only");
    if (sched.has("auto")) {
      // The `auto` policy's settings (docs/scheduling-model.md section 10).
      const Reader options = sched.child("auto");
      if (options.has("objective")) {
        cfg.auto_objective = options.string("objective");
        try {
          core::parse_auto_objective(cfg.auto_objective);
        } catch (const std::invalid_argument& e) {
          options.fail("objective", e.what());
        }
      }
      if (options.has("candidates")) {
        const auto& list = options.at("candidates");
        if (!list.is_array()) options.fail("candidates", "must be a list of policy names");
        const auto known = core::policy_names();
        for (const auto& name : list) {
          if (!name.is_string() ||
              std::find(known.begin(), known.end(), name.get<std::string>()) == known.end() ||
              !core::AutoPolicy::choosable(name.get<std::string>()))
            options.fail("candidates",
                         "entries must name policies that decide per window (not auto or a "
                         "batch-reservation policy: datawarp, slurm-easy, slurm-easy-sjf, "
                         "plan-based), got " +
                             name.dump());
          cfg.auto_candidates.push_back(name.get<std::string>());
        }
      }
    }
    if (sched.has("plan_based")) {
      // The plan-based peer's settings (docs/scheduling-model.md section 8).
      const Reader options = sched.child("plan_based");
      if (options.has("alpha")) cfg.plan_alpha = options.number("alpha", 0, false);
      if (options.has("reservation_depth"))
        cfg.plan_reservation_depth = options.int32("reservation_depth", 0);
    }

    const uint64_t seed = root.has("seed") ? static_cast<uint64_t>(root.int32("seed", 0)) : 1;
    cfg.seed = seed;
    Scenario s{
        root.string("name"),     seed, plat, cfg, parse_device(devices, pfs.string("device")),
        pfs.int32("servers", 1), {}};

    if (sched.has("prefetch_ahead")) s.prefetch_ahead = sched.boolean("prefetch_ahead");
    if (plat.fat_tree) {
      const auto leaves =
          std::accumulate(plat.tree.down.begin(), plat.tree.down.end(), 1UL, std::multiplies<>());
      // Widened before adding: three counts up to INT_MAX each would overflow an int.
      const auto hosts = static_cast<unsigned long>(plat.compute_nodes) +
                         static_cast<unsigned long>(cfg.buffer_count) +
                         static_cast<unsigned long>(s.pfs_servers);
      if (leaves < hosts)
        platform.fail("fat_tree.down", "the tree has " + std::to_string(leaves) +
                                           " leaves, the scenario needs " + std::to_string(hosts) +
                                           " (compute nodes + buffers + PFS servers)");
    }

    if (root.has("pricing")) s.pricing = parse_pricing(root.child("pricing"));

    long long nodes_used = 0;
    for (const Reader& a : root.objects("apps")) {
      AppSpec app;
      app.name = a.string("name");
      app.nodes = a.has("nodes") ? a.int32("nodes", 1) : 1;
      app.arrival = a.has("arrival") ? a.number("arrival", 0) : 0;
      app.priority = a.has("priority") ? a.int32("priority", -1000000) : 0;
      if (a.has("hint")) {
        const auto hint = a.string("hint");
        if (hint != "flushable" && hint != "cached") a.fail("hint", "must be flushable or cached");
        app.hint = hint == "cached" ? core::Hint::Cached : core::Hint::Flushable;
      }
      app.user = a.has("user") ? a.string("user") : "";
      app.walltime = a.has("walltime") ? a.number("walltime", 0) : 0;
      if (a.has("reservation")) app.reservation = a.number("reservation", 0, false);
      if (a.has("write_only")) app.write_only = a.boolean("write_only");
      // The job's ranks: its accounting's NCPUS (the simulator models nodes).
      app.ranks = a.has("ranks") ? a.int32("ranks", 1) : 1;
      if (a.has("io_qos")) {
        app.io_qos = a.string("io_qos");
        try {
          app.io_slowdown = s.pricing.resolve(app.io_qos).slowdown;
        } catch (const std::invalid_argument& e) {
          a.fail("io_qos", e.what());
        }
      }
      nodes_used += app.nodes;
      if (plat.shared && app.nodes > plat.compute_nodes)
        a.fail("nodes", "larger than the machine (platform.compute_nodes = " +
                            std::to_string(plat.compute_nodes) + ")");
      for (const Reader& p : a.objects("phases")) {
        PhaseSpec ph;
        ph.compute = p.number("compute", 0);
        ph.bytes = p.number("size", 0, false);
        if (ph.bytes > cfg.buffer_capacity * cfg.buffer_count)
          p.fail("size", "larger than the total buffer capacity");
        ph.op = p.has("op") ? parse_op(p, "op") : core::Op::Write;
        ph.priority = p.has("priority") ? p.int32("priority", -1000000) : app.priority;
        if (p.has("source_phase")) {
          ph.source_phase = p.int32("source_phase", 0);
          if (ph.op != core::Op::Read) p.fail("source_phase", "only a read phase has a source");
          if (static_cast<size_t>(ph.source_phase) >= app.phases.size() ||
              app.phases[static_cast<size_t>(ph.source_phase)].op != core::Op::Write)
            p.fail("source_phase", "must be the index of an earlier write phase of this app");
        }
        app.phases.push_back(ph);
      }
      s.apps.push_back(std::move(app));
    }
    if (!plat.shared && nodes_used > plat.compute_nodes)
      platform.fail("compute_nodes", "applications need " + std::to_string(nodes_used) + " nodes");
    document.check_all_read();
    return s;
  } catch (const json::exception& e) {
    throw InputError(e.what());
  }
}

Scenario load_scenario(const std::string& path) { return simkit::load_with(path, parse_scenario); }

}  // namespace harmonia::sim
