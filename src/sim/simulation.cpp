#include "sim/simulation.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "core/registry.hpp"

namespace sg4 = simgrid::s4u;

namespace harmonia::sim {

namespace {
void wait_all(std::vector<sg4::ActivityPtr>& activities) {
  for (auto& a : activities) a->wait();
}

core::PhaseRequest read_request(const AppSpec& spec, core::AppId app, size_t k) {
  const PhaseSpec& phase = spec.phases[k];
  return {
      app, static_cast<int>(k), phase.bytes, core::Op::Read, phase.priority, phase.source_phase};
}
}  // namespace

Simulation::Simulation(const Scenario& scenario, const std::string& policy, ControlConfig control,
                       ProgressConfig progress)
    : scenario_(scenario), hosts_(build_platform(scenario)), progress_(progress) {
  // The scheduler runs where the decider does.
  if (control.ranks_per_node > 0)
    control_ = std::make_unique<ControlPlane>(control, hosts_.buffers.front(), scenario.seed);
  scheduler_ = core::make_scheduler(policy, scenario.scheduler, *this);
  const auto buffers = static_cast<size_t>(scenario.scheduler.buffer_count);
  draining_.assign(buffers, false);
  decider_wakeup_ = sg4::Semaphore::create(0);
  for (size_t b = 0; b < buffers; ++b) drain_wakeups_.push_back(sg4::Semaphore::create(0));
  if (scenario.platform.shared) {
    for (size_t n = 0; n < hosts_.compute.size(); ++n) free_nodes_.insert(free_nodes_.end(), n);
  } else {
    int node = 0;
    for (const auto& app : scenario.apps) {
      first_node_.push_back(node);
      node += app.nodes;
    }
  }
}

std::vector<size_t> Simulation::take_nodes(size_t spec_index) {
  const auto count = static_cast<size_t>(scenario_.apps[spec_index].nodes);
  std::vector<size_t> nodes;
  if (!scenario_.platform.shared) {
    for (size_t n = 0; n < count; ++n)
      nodes.push_back(static_cast<size_t>(first_node_[spec_index]) + n);
    return nodes;
  }
  // The policy admits a job only when its nodes are free: the lowest numbered are taken.
  if (free_nodes_.size() < count)
    throw std::logic_error("job admitted with " + std::to_string(free_nodes_.size()) +
                           " nodes free, it needs " + std::to_string(count));
  for (size_t k = 0; k < count; ++k) {
    nodes.push_back(*free_nodes_.begin());
    free_nodes_.erase(free_nodes_.begin());
  }
  return nodes;
}

sg4::SemaphorePtr Simulation::wakeup(core::AppId app) {
  auto [it, inserted] = app_wakeups_.try_emplace(app);
  if (inserted) it->second = sg4::Semaphore::create(0);
  return it->second;
}

void Simulation::admit(core::AppId app) {
  if (!scenario_.platform.shared) {
    effects_.emplace_back([this, app] { wakeup(app)->release(); });  // waiting since registered
    return;
  }
  // On a shared machine an application is an actor from its admission: the jobs waiting in
  // the queue, often thousands, cost nothing.
  const size_t spec_index = spec_of_app_.at(static_cast<size_t>(app));
  auto nodes = take_nodes(spec_index);
  effects_.emplace_back([this, spec_index, app, nodes = std::move(nodes)] {
    sg4::Actor::create(scenario_.apps[spec_index].name, hosts_.compute[nodes.front()],
                       [this, spec_index, app, nodes] { run_app(spec_index, app, nodes); });
  });
}

void Simulation::grant(const core::PhaseRequest& phase,
                       const std::vector<core::BufferId>& buffers) {
  grants_[phase.app] = buffers;
  effects_.emplace_back([this, app = phase.app] { wakeup(app)->release(); });
}

void Simulation::start_drain(core::BufferId buffer) {
  draining_[static_cast<size_t>(buffer)] = true;
  effects_.emplace_back([this, buffer] { drain_wakeups_[static_cast<size_t>(buffer)]->release(); });
}

void Simulation::stop_drain(core::BufferId buffer) {
  draining_[static_cast<size_t>(buffer)] = false;
}

void Simulation::start_prefetch(const core::PhaseRequest& phase,
                                const std::vector<core::BufferId>& buffers) {
  // The stage-in runs in its own actor.
  effects_.emplace_back([this, phase, buffers] {
    sg4::Actor::create("prefetch-" + std::to_string(phase.app) + "." + std::to_string(phase.index),
                       hosts_.buffers[static_cast<size_t>(buffers.front())],
                       [this, phase, buffers] { run_prefetch(phase, buffers); });
  });
}

void Simulation::apply_effects() {
  // Every call into SimGrid lets the other actors of this instant run, and deliver their events
  // to the policy: made in the middle of a policy call, it would let one event interleave with
  // the handling of another (a job admitted twice). They wait until the call has returned.
  while (!effects_.empty()) {
    auto effects = std::move(effects_);
    effects_.clear();
    for (auto& effect : effects) effect();
  }
}

void Simulation::run_prefetch(const core::PhaseRequest& phase,
                              const std::vector<core::BufferId>& buffers) {
  const auto servers = hosts_.pfs.size();
  const double per_buffer = phase.bytes / static_cast<double>(buffers.size());
  const double piece = per_buffer / static_cast<double>(servers);
  std::vector<sg4::ActivityPtr> activities;
  for (core::BufferId b : buffers) {
    auto* buffer_host = hosts_.buffers[static_cast<size_t>(b)];
    activities.push_back(hosts_.buffer_disks[static_cast<size_t>(b)]->write_async(
        static_cast<sg_size_t>(per_buffer)));
    for (size_t s = 0; s < servers; ++s) {
      activities.push_back(hosts_.pfs_disks[s]->read_async(static_cast<sg_size_t>(piece)));
      activities.push_back(
          sg4::Comm::sendto_async(hosts_.pfs[s], buffer_host, static_cast<uint64_t>(piece)));
    }
  }
  events_ += static_cast<long long>(activities.size());
  wait_all(activities);
  ++events_;
  scheduler_->on_prefetched(phase.app, phase.index, sg4::Engine::get_clock());
  apply_effects();
  request_decision();
}

core::AppId Simulation::register_app(size_t spec_index) {
  const AppSpec& spec = scenario_.apps[spec_index];
  sg4::this_actor::sleep_until(spec.arrival);
  core::AppInfo info{spec.name, spec.nodes,   spec.priority, spec.hint, spec.reserved_bytes(),
                     spec.user, spec.walltime};
  info.write_only = spec.write_only;
  info.io_qos = spec.io_qos;
  info.io_slowdown = spec.io_slowdown;
  for (size_t k = 0; k < spec.phases.size(); ++k)
    if (spec.phases[k].op == core::Op::Read)
      info.declared_reads.push_back(read_request(spec, 0, k));
  ++events_;
  // The policy may admit it at once: its spec must be known by then.
  spec_of_app_.push_back(spec_index);
  const core::AppId id = scheduler_->on_app_register(info, sg4::Engine::get_clock());
  apply_effects();
  request_decision();
  return id;
}

void Simulation::run_arrivals() {
  std::vector<size_t> order(scenario_.apps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return scenario_.apps[a].arrival < scenario_.apps[b].arrival;
  });
  for (size_t spec_index : order) register_app(spec_index);
}

void Simulation::run_own_nodes_app(size_t spec_index) {
  const core::AppId id = register_app(spec_index);
  wakeup(id)->acquire();  // admitted
  run_app(spec_index, id, take_nodes(spec_index));
}

void Simulation::run_app(size_t spec_index, core::AppId id, std::vector<size_t> node_indices) {
  const AppSpec& spec = scenario_.apps[spec_index];
  std::vector<sg4::Host*> nodes(node_indices.size());
  for (size_t k = 0; k < nodes.size(); ++k) nodes[k] = hosts_.compute[node_indices[k]];
  const double registered = sg4::Engine::get_clock();
  for (size_t k = 0; k < spec.phases.size(); ++k) {
    const PhaseSpec& phase = spec.phases[k];
    if (phase.op == core::Op::Read && scenario_.prefetch_ahead) {
      // The phase detection knows a read comes next: its data may be fetched during the compute.
      ++events_;
      scheduler_->on_prefetch_request(read_request(spec, id, k), sg4::Engine::get_clock());
      apply_effects();
      request_decision();
    }
    sg4::this_actor::sleep_for(phase.compute);
    ++events_;
    const auto request = [&] {
      scheduler_->on_phase_request(
          {id, static_cast<int>(k), phase.bytes, phase.op, phase.priority, phase.source_phase},
          sg4::Engine::get_clock());
      apply_effects();
      request_decision();
    };
    if (control_)
      control_->phase_begin(id, static_cast<int>(k), nodes, request);
    else
      request();
    wakeup(id)->acquire();  // granted
    if (control_) control_->granted(id, static_cast<int>(k), nodes);
    const auto buffers = grants_.at(id);

    // Every node of the application sends its share to every granted buffer while the buffer's
    // device writes it: a pipelined transfer, as fast as its slower stage.
    const double per_buffer = phase.bytes / static_cast<double>(buffers.size());
    const double per_stream = per_buffer / spec.nodes;
    std::vector<sg4::ActivityPtr> activities;
    for (core::BufferId b : buffers) {
      auto* buffer_host = hosts_.buffers[static_cast<size_t>(b)];
      auto* disk = hosts_.buffer_disks[static_cast<size_t>(b)];
      for (int n = 0; n < spec.nodes; ++n) {
        auto* node = nodes[static_cast<size_t>(n)];
        activities.push_back(
            phase.op == core::Op::Write
                ? sg4::Comm::sendto_async(node, buffer_host, static_cast<uint64_t>(per_stream))
                : sg4::Comm::sendto_async(buffer_host, node, static_cast<uint64_t>(per_stream)));
      }
      activities.push_back(phase.op == core::Op::Write
                               ? disk->write_async(static_cast<sg_size_t>(per_buffer))
                               : disk->read_async(static_cast<sg_size_t>(per_buffer)));
    }
    events_ += static_cast<long long>(activities.size());
    wait_all(activities);
    ++events_;
    const auto complete = [&] {
      scheduler_->on_phase_complete(id, static_cast<int>(k), sg4::Engine::get_clock());
      apply_effects();
      request_decision();
    };
    if (control_)
      control_->phase_end(id, static_cast<int>(k), nodes, complete);
    else
      complete();
  }
  if (control_) control_->lived(spec.nodes, sg4::Engine::get_clock() - registered);
  ++events_;
  // Its nodes are free before the policy hears of its end, which may admit a job on them.
  if (scenario_.platform.shared) free_nodes_.insert(node_indices.begin(), node_indices.end());
  app_wakeups_.erase(id);
  grants_.erase(id);
  scheduler_->on_app_end(id, sg4::Engine::get_clock());
  apply_effects();
  request_decision();
  ++apps_finished_;
  // The last application out wakes every drain actor so that those with nothing left can exit.
  if (apps_finished_ == scenario_.apps.size())
    for (auto& wakeup : drain_wakeups_) wakeup->release();
}

void Simulation::report_progress(bool last) {
  if (progress_.every_seconds <= 0 || progress_.out == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (!last && std::chrono::duration<double>(now - last_report_).count() < progress_.every_seconds)
    return;
  last_report_ = now;
  const double wall = std::chrono::duration<double>(now - started_).count();
  const double rate = wall > 0 ? static_cast<double>(apps_finished_) / wall : 0;
  const size_t total = scenario_.apps.size();
  // One line a report, its fields named, for people and for the front end alike.
  char line[256];
  const double left = rate > 0 ? static_cast<double>(total - apps_finished_) / rate : -1;
  std::snprintf(line, sizeof line,
                "progress: simulated %.0f s (%.1f d), jobs %zu/%zu, %.1f jobs/s, wall %.1f s, "
                "left %.0f s\n",
                sg4::Engine::get_clock(), sg4::Engine::get_clock() / 86400, apps_finished_, total,
                rate, wall, left);
  *progress_.out << line << std::flush;
}

std::string Simulation::stall_report() const {
  constexpr double kGB = 1e9;
  const auto& apps = scheduler_->apps();
  const auto gb = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", bytes / kGB);
    return std::string(text);
  };
  std::string report = "simulation stalled at " + std::to_string(sg4::Engine::get_clock()) +
                       " s: " + std::to_string(scenario_.apps.size() - apps_finished_) +
                       " application(s) never finished (policy left phases waiting forever)";
  // The first to arrive of those that did not end, and what it waits for.
  const core::AppState* first = nullptr;
  for (const auto& app : apps)
    if (!app.ended && (first == nullptr || app.arrival < first->arrival)) first = &app;
  if (first == nullptr) return report;
  const auto id = static_cast<core::AppId>(first - apps.data());
  report += "; the first, " + first->info.name + " (arrived at " + std::to_string(first->arrival) +
            " s, declared " + gb(first->info.declared_bytes) + ", " +
            std::to_string(first->info.nodes) + " node(s)), ";
  if (!first->admitted) {
    report += "was never admitted (" + std::to_string(scheduler_->free_nodes()) + " node(s) free)";
  } else {
    report += "holds " + gb(first->held_bytes) + " on the buffers";
    for (const auto& p : scheduler_->pending())
      if (p.request.app == id) {
        report += ", its phase " + std::to_string(p.request.index) + " (" + gb(p.request.bytes) +
                  ") waiting since " + std::to_string(p.requested) + " s";
        break;
      }
  }
  double used = 0, capacity = 0, drainable = 0, clean = 0;
  std::map<core::AppId, double> held_by;
  for (const auto& b : scheduler_->buffers()) {
    used += b.used;
    capacity += b.capacity;
    for (const auto& h : b.held) {
      (h.clean ? clean : h.drainable ? drainable : held_by[h.app]) += h.bytes;
    }
  }
  report += "; the buffers hold " + gb(used) + " of " + gb(capacity) + " (" + gb(drainable) +
            " drainable, " + gb(clean) + " staged in)";
  // The largest holder of bytes that may not drain yet, and where its job stands.
  const auto largest =
      std::max_element(held_by.begin(), held_by.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  if (largest != held_by.end()) {
    const auto& holder = apps.at(static_cast<size_t>(largest->first));
    report += "; " + holder.info.name + " holds " + gb(largest->second) + " not yet drainable (" +
              (holder.ended      ? "ended"
               : holder.admitted ? "running"
                                 : "not admitted") +
              ")";
  }
  return report;
}

double Simulation::next_chunk(size_t buffer) const {
  if (!draining_[buffer]) return 0;
  // Down to the scheduler's own tolerance: a drain that stopped short of it (rounding dust of
  // less than a byte) would leave the buffer draining in the scheduler's eyes and idle here.
  const double chunk = std::min(kDrainChunk, scheduler_->buffers()[buffer].drainable());
  return chunk <= core::kByteEpsilon ? 0 : chunk;
}

void Simulation::run_drain(core::BufferId buffer) {
  const auto b = static_cast<size_t>(buffer);
  // Runs until every application has ended and this buffer holds nothing, so that the simulation
  // ends with all data on the PFS.
  const auto finished = [&] {
    return apps_finished_ == scenario_.apps.size() && scheduler_->buffers()[b].held.empty();
  };
  while (!finished()) {
    drain_wakeups_[b]->acquire();
    // SimGrid 3.32 keeps every disk I/O in the list of the actor that started it until that
    // actor exits, and walks the list whenever one of the actor's transfers ends: a drain that
    // moved every chunk itself would make each chunk cost more than the one before. Each chunk
    // moves in an actor of its own.
    for (double chunk = next_chunk(b); chunk > 0;)
      sg4::Actor::create("drain-chunk", hosts_.buffers[b], [this, buffer, &chunk] {
        chunk = move_chunk(buffer, chunk);
      })->join();
  }
}

double Simulation::move_chunk(core::BufferId buffer, double chunk) {
  const auto b = static_cast<size_t>(buffer);
  auto* host = hosts_.buffers[b];
  const auto servers = hosts_.pfs.size();
  // Stripe the chunk over every PFS server, as a parallel file system does. Rounding dust of
  // less than a byte moves at once, and no activity moves zero bytes.
  std::vector<sg4::ActivityPtr> activities;
  if (chunk >= 1) {
    activities.push_back(hosts_.buffer_disks[b]->read_async(static_cast<sg_size_t>(chunk)));
    for (size_t s = 0; s < servers; ++s) {
      const auto piece =
          std::max<sg_size_t>(1, static_cast<sg_size_t>(chunk / static_cast<double>(servers)));
      activities.push_back(sg4::Comm::sendto_async(host, hosts_.pfs[s], piece));
      activities.push_back(hosts_.pfs_disks[s]->write_async(piece));
    }
  }
  events_ += static_cast<long long>(activities.size());
  wait_all(activities);
  ++events_;
  scheduler_->on_drained(buffer, chunk, sg4::Engine::get_clock());
  apply_effects();
  request_decision();
  // Whether to go on is decided now, before the policy hears of the chunk.
  return next_chunk(b);
}

void Simulation::request_decision() {
  if (decision_requested_) return;
  decision_requested_ = true;
  decider_wakeup_->release();
}

void Simulation::run_decider() {
  while (true) {
    // A phase held back by discounted scheduling is released at a time no event may mark.
    if (const auto release = scheduler_->next_release())
      decider_wakeup_->acquire_timeout(std::max(0.0, *release - sg4::Engine::get_clock()));
    else
      decider_wakeup_->acquire();
    // Actors woken at this instant run before the decider gets the CPU back, so their requests
    // are decided together.
    sg4::this_actor::yield();
    decision_requested_ = false;
    ++events_;
    scheduler_->on_tick(sg4::Engine::get_clock());
    apply_effects();
  }
}

RunResult Simulation::run() {
  auto* engine = sg4::Engine::get_instance();
  started_ = last_report_ = std::chrono::steady_clock::now();
  if (scenario_.platform.shared) {
    sg4::Actor::create("arrivals", hosts_.compute.front(), [this] { run_arrivals(); });
  } else {
    // Every job has nodes of its own: one actor per job from the start, on its first node, which
    // registers it at its arrival.
    for (size_t i = 0; i < scenario_.apps.size(); ++i)
      sg4::Actor::create(scenario_.apps[i].name,
                         hosts_.compute[static_cast<size_t>(first_node_[i])],
                         [this, i] { run_own_nodes_app(i); });
  }
  for (size_t b = 0; b < hosts_.buffers.size(); ++b)
    sg4::Actor::create("drain-" + std::to_string(b), hosts_.buffers[b],
                       [this, b] { run_drain(static_cast<core::BufferId>(b)); });
  sg4::Actor::create("decider", hosts_.buffers.front(), [this] { run_decider(); })->daemonize();
  if (progress_.every_seconds > 0)
    sg4::Engine::on_time_advance_cb([this](double) { report_progress(false); });
  engine->run();
  report_progress(true);
  if (apps_finished_ != scenario_.apps.size()) throw std::runtime_error(stall_report());
  const auto& rec = scheduler_->recorder();
  auto accounting =
      core::accounting_records(*scheduler_, scenario_.pricing, sg4::Engine::get_clock());
  for (size_t i = 0; i < accounting.size(); ++i) accounting[i].ncpus = scenario_.apps[i].ranks;
  RunResult result{rec.app_metrics(),
                   rec.system_metrics(),
                   rec.phases(),
                   rec.drains(),
                   rec.prefetches(),
                   std::move(accounting),
                   events_,
                   {},
                   0};
  if (control_) {
    result.control = control_->phases();
    result.heartbeats = control_->heartbeats();
  }
  return result;
}

}  // namespace harmonia::sim
