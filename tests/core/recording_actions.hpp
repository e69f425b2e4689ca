#pragma once
/// @file What the policy tests share: an `Actions` that records every decision a scheduler
/// makes, a driver that delivers events as a host does, and buffers of the SSD the Harmonia
/// paper measured (Fig. 3).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core::testing {

constexpr double GB = 1e9;

struct Granted {
  AppId app;
  int index;
  std::vector<BufferId> buffers;
};

class RecordingActions : public Actions {
 public:
  void admit(AppId app) override {
    admitted.push_back(app);
    log.push_back("admit " + std::to_string(app));
  }
  void grant(const PhaseRequest& p, const std::vector<BufferId>& b) override {
    grants.push_back({p.app, p.index, b});
    log.push_back("grant " + std::to_string(p.app) + "." + std::to_string(p.index));
  }
  void start_drain(BufferId b) override { drain_starts.push_back(b); }
  void stop_drain(BufferId b) override { drain_stops.push_back(b); }
  void start_prefetch(const PhaseRequest& p, const std::vector<BufferId>& b) override {
    prefetches.push_back({p.app, p.index, b});
    log.push_back("prefetch " + std::to_string(p.app) + "." + std::to_string(p.index));
  }

  bool was_admitted(AppId app) const {
    return std::find(admitted.begin(), admitted.end(), app) != admitted.end();
  }
  bool was_granted(AppId app, int index) const {
    return std::any_of(grants.begin(), grants.end(),
                       [&](const Granted& g) { return g.app == app && g.index == index; });
  }
  /// The first grant of any phase of `app`, or nullptr.
  const Granted* grant_of(AppId app) const {
    const auto it =
        std::find_if(grants.begin(), grants.end(), [&](const Granted& g) { return g.app == app; });
    return it == grants.end() ? nullptr : &*it;
  }
  /// The application of each grant, in the order granted.
  std::vector<AppId> granted_apps() const {
    std::vector<AppId> apps;
    for (const auto& g : grants) apps.push_back(g.app);
    return apps;
  }

  std::vector<AppId> admitted;
  std::vector<Granted> grants;
  std::vector<Granted> prefetches;  ///< stage-ins started, in order
  /// Admissions, grants and prefetches in the order they were made ("grant 1.0": app 1 phase 0).
  std::vector<std::string> log;
  std::vector<BufferId> drain_starts, drain_stops;
};

/// `count` buffers of `capacity` bytes each on the paper's SSD (500 MB/s write, 550 MB/s read,
/// concurrency 2, interference slope 0.9557), with 10 Gb/s links to buffers and compute nodes.
inline SchedulerConfig ssd_buffers(int count, double capacity) {
  SchedulerConfig c(DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557));
  c.buffer_count = count;
  c.buffer_capacity = capacity;
  c.buffer_link_bw = 1.25e9;
  c.client_node_bw = 1.25e9;
  return c;
}

/// Two SSD buffers of `capacity` on a machine of `nodes` compute nodes the jobs share.
inline SchedulerConfig shared_machine(int nodes, double capacity = 500 * GB) {
  SchedulerConfig c = ssd_buffers(2, capacity);
  c.compute_nodes = nodes;
  return c;
}

/// A batch job: its nodes, time limit and declared burst-buffer request.
inline AppInfo batch_job(const std::string& name, int nodes, double walltime,
                         double declared = 10 * GB) {
  AppInfo info;
  info.name = name;
  info.nodes = nodes;
  info.walltime = walltime;
  info.declared_bytes = declared;
  return info;
}

/// Drives a scheduler as a host does: each event, then one decision (`on_tick`) at its instant.
class PolicyDriver {
 public:
  PolicyDriver(const std::string& policy, SchedulerConfig cfg)
      : scheduler(make_scheduler(policy, std::move(cfg), actions)) {}

  AppId reg(const AppInfo& info, double now) {
    const AppId id = scheduler->on_app_register(info, now);
    scheduler->on_tick(now);
    return id;
  }
  void request(AppId app, int index, double bytes, double now, int priority = 0) {
    scheduler->on_phase_request({app, index, bytes, Op::Write, priority}, now);
    scheduler->on_tick(now);
  }
  /// Phase `index` of each of `apps`, all requested at `now`, decided together.
  void request_together(const std::vector<AppId>& apps, double bytes, double now, int index = 0,
                        int priority = 0) {
    for (AppId a : apps) scheduler->on_phase_request({a, index, bytes, Op::Write, priority}, now);
    scheduler->on_tick(now);
  }
  /// The application announces read phase `index` (its data may be prefetched from now on).
  void announce_read(AppId app, int index, double bytes, double now, int source = -1) {
    scheduler->on_prefetch_request({app, index, bytes, Op::Read, 0, source}, now);
    scheduler->on_tick(now);
  }
  void request_read(AppId app, int index, double bytes, double now, int source = -1) {
    scheduler->on_phase_request({app, index, bytes, Op::Read, 0, source}, now);
    scheduler->on_tick(now);
  }
  void prefetched(AppId app, int index, double now) {
    scheduler->on_prefetched(app, index, now);
    scheduler->on_tick(now);
  }
  void complete(AppId app, int index, double now) {
    scheduler->on_phase_complete(app, index, now);
    scheduler->on_tick(now);
  }
  void drained(BufferId b, double bytes, double now) {
    scheduler->on_drained(b, bytes, now);
    scheduler->on_tick(now);
  }
  void end(AppId app, double now) {
    scheduler->on_app_end(app, now);
    scheduler->on_tick(now);
  }
  const std::vector<BufferState>& buffers() const { return scheduler->buffers(); }
  /// Bytes used on all buffers together.
  double used() const {
    double total = 0;
    for (const auto& b : buffers()) total += b.used;
    return total;
  }

  RecordingActions actions;
  std::unique_ptr<Scheduler> scheduler;
};

}  // namespace harmonia::core::testing
