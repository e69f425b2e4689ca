#include "core/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "core/optimizer.hpp"

namespace harmonia::core {

namespace {

/// The entry of `running` for phase `index` of `app` (its stage-in when `prefetch`): end()
/// when there is none.
template <class Running>
auto find_running(Running& running, AppId app, int index, bool prefetch) {
  return std::find_if(running.begin(), running.end(), [&](const RunningPhase& p) {
    return p.prefetch == prefetch && p.request.app == app && p.request.index == index;
  });
}

}  // namespace

int SchedulerConfig::resolved_max_colocated() const {
  return max_colocated ? *max_colocated : buffer_device.max_colocated(if_limit);
}

int SchedulerConfig::phase_buffer_bound() const {
  return max_phase_buffers > 0 ? std::min(max_phase_buffers, buffer_count) : buffer_count;
}

double BufferState::drainable() const {
  double total = 0;
  for (const auto& h : held)
    if (h.drainable) total += h.bytes;
  return total;
}

Scheduler::Scheduler(SchedulerConfig config, Actions& actions)
    : config_(std::move(config)),
      actions_(actions),
      buffers_(static_cast<size_t>(config_.buffer_count)),
      max_colocated_(config_.resolved_max_colocated()),
      recorder_(config_.buffer_count, config_.buffer_capacity) {
  if (config_.buffer_count < 1) throw std::invalid_argument("buffer_count must be >= 1");
  if (config_.min_buffers < 1 || config_.min_buffers > config_.buffer_count)
    throw std::invalid_argument("min_buffers must be in [1, buffer_count]");
  if (config_.max_phase_buffers < 0 ||
      (config_.max_phase_buffers > 0 && config_.max_phase_buffers < config_.min_buffers))
    throw std::invalid_argument("max_phase_buffers must be 0 (no bound) or at least min_buffers");
  if (max_colocated_ < 1) throw std::invalid_argument("max_colocated must be >= 1");
  if (config_.max_running_apps && *config_.max_running_apps < 0)
    throw std::invalid_argument("max_running_apps must be >= 0 (0: no limit)");
  for (auto& b : buffers_) b.capacity = config_.buffer_capacity;
}

AppId Scheduler::on_app_register(const AppInfo& info, double now) {
  if (config_.compute_nodes > 0 && info.nodes > config_.compute_nodes)
    throw std::invalid_argument("job '" + info.name + "' needs " + std::to_string(info.nodes) +
                                " nodes, the machine has " + std::to_string(config_.compute_nodes));
  const AppId id = static_cast<AppId>(apps_.size());
  apps_.push_back({info, false, false, 0});
  apps_.back().arrival = now;
  staging_in_.push_back(0);
  written_.emplace_back();
  recorder_.app_arrived(id, info.name, now);
  admit_on_register(id, now);
  return id;
}

void Scheduler::admit_on_register(AppId app, double now) {
  waiting_.push_back(app);
  admit_waiting(now);
}

int Scheduler::max_running_apps() const {
  return config_.max_running_apps ? *config_.max_running_apps : default_max_running_apps();
}

int Scheduler::free_nodes() const {
  return config_.compute_nodes > 0 ? config_.compute_nodes - nodes_in_use_
                                   : std::numeric_limits<int>::max();
}

int Scheduler::nodes_needed(AppId app) const {
  return config_.compute_nodes > 0 ? apps_[static_cast<size_t>(app)].info.nodes : 0;
}

double Scheduler::expected_end(AppId app, double now) const {
  const auto& state = apps_[static_cast<size_t>(app)];
  if (!(state.info.walltime > 0)) return std::numeric_limits<double>::infinity();
  return std::max(now, state.admitted_at + state.info.walltime);
}

void Scheduler::admit_waiting(double now) {
  const int limit = max_running_apps();
  while (!waiting_.empty()) {
    if (limit > 0 && running_apps_.size() >= static_cast<size_t>(limit)) return;
    const AppId app = waiting_.front();
    if (nodes_needed(app) > free_nodes()) break;
    waiting_.pop_front();
    admit(app, now);
  }
  if (config_.compute_nodes > 0 && waiting_.size() > 1) backfill_waiting(now);
}

void Scheduler::backfill_waiting(double now) {
  // The first job's reservation: when running jobs, ending at their limits, free enough nodes
  // (its shadow time), and the nodes left over then beyond its need (the extra).
  const int need = nodes_needed(waiting_.front());
  std::vector<std::pair<double, int>> ending;
  for (AppId app : running_apps_) ending.emplace_back(expected_end(app, now), nodes_needed(app));
  std::sort(ending.begin(), ending.end());
  int available = free_nodes();
  double shadow = now;
  for (const auto& [end, nodes] : ending) {
    if (available >= need) break;
    available += nodes;
    shadow = end;
  }
  int extra = available - need;
  // A later job starts now if it fits and either ends, by its limit, before the shadow time, or
  // needs no more than the extra (which it then takes).
  const int limit = max_running_apps();
  for (auto it = std::next(waiting_.begin()); it != waiting_.end();) {
    if (limit > 0 && running_apps_.size() >= static_cast<size_t>(limit)) return;
    const AppId app = *it;
    const int nodes = nodes_needed(app);
    const double walltime = apps_[static_cast<size_t>(app)].info.walltime;
    const bool before_shadow = walltime > 0 && now + walltime <= shadow;
    if (nodes <= free_nodes() && (before_shadow || nodes <= extra)) {
      if (!before_shadow) extra -= nodes;
      it = waiting_.erase(it);
      admit(app, now);
    } else {
      ++it;
    }
  }
}

void Scheduler::admit(AppId app, double now) {
  auto& state = apps_.at(static_cast<size_t>(app));
  state.admitted = true;
  state.admitted_at = now;
  running_apps_.insert(app);
  nodes_in_use_ += nodes_needed(app);
  if (stages_in_before_start()) {
    // Batch-queue burst buffers stage the job's input in before it starts, striped over every
    // buffer inside its reservation; it starts when the last stage-in is done (on_prefetched).
    std::vector<BufferId> all(static_cast<size_t>(config_.buffer_count));
    for (BufferId b = 0; b < config_.buffer_count; ++b) all[static_cast<size_t>(b)] = b;
    for (PhaseRequest read : state.info.declared_reads) {
      // A read of what the job itself writes finds it in the reservation: nothing to stage in.
      if (read.source_phase >= 0) continue;
      read.app = app;
      read.op = Op::Read;
      if (!(read.bytes > 0)) throw std::invalid_argument("declared read size must be > 0");
      if (find_read(app, read.index) != reads_.end())
        throw std::invalid_argument("read phase declared twice");
      reads_.push_back({read, ReadPhase::Stage::Prefetching, all, false, 0, false});
      staging_in_[static_cast<size_t>(app)] += 1;
      start_prefetch(read, now, all, now);
    }
    if (staging_in_[static_cast<size_t>(app)] > 0) return;
  }
  recorder_.app_started(app, now);
  actions_.admit(app);
}

std::vector<ReadPhase>::iterator Scheduler::find_read(AppId app, int index) {
  return std::find_if(reads_.begin(), reads_.end(), [&](const ReadPhase& r) {
    return r.request.app == app && r.request.index == index;
  });
}

bool Scheduler::source_on_buffers(AppId app, int source) const {
  const auto& written = written_[static_cast<size_t>(app)];
  if (source < 0 || static_cast<size_t>(source) >= written.size() || !(written[source] > 0))
    return false;
  double held = 0;
  for (const auto& buf : buffers_)
    for (const auto& h : buf.held)
      if (h.app == app && h.phase == source) held += h.bytes;
  return held >= written[static_cast<size_t>(source)] - kByteEpsilon;
}

std::vector<BufferId> Scheduler::pin_phase(AppId app, int index, bool pinned) {
  std::vector<BufferId> where;
  const bool drainable = apps_[static_cast<size_t>(app)].ended || drain_before_app_end(app);
  for (BufferId b = 0; b < config_.buffer_count; ++b) {
    bool here = false;
    for (auto& h : buffers_[static_cast<size_t>(b)].held)
      if (h.app == app && h.phase == index) {
        h.drainable = !pinned && drainable;
        here = true;
      }
    if (here) where.push_back(b);
  }
  return where;
}

ReadPhase& Scheduler::track_read(const PhaseRequest& request, double now) {
  const auto& app = apps_.at(static_cast<size_t>(request.app));
  if (!app.admitted || app.ended)
    throw std::logic_error("read phase of an application that is not running");
  if (request.op != Op::Read) throw std::invalid_argument("prefetch of a phase that is no read");
  if (!(request.bytes > 0)) throw std::invalid_argument("phase size must be > 0");
  if (source_on_buffers(request.app, request.source_phase)) {
    // Read-after-write: the data never left the buffers (hint `cached`, or not drained yet); it
    // is read where it lies and held there until the read is done.
    ReadPhase read{request, ReadPhase::Stage::Ready, {}, false, 0, true};
    read.buffers = pin_phase(request.app, request.source_phase, true);
    reads_.push_back(std::move(read));
  } else {
    reads_.push_back({request, ReadPhase::Stage::Pending, {}, false, 0, false});
    pending_.push_back({request, now});
  }
  return reads_.back();
}

void Scheduler::on_prefetch_request(const PhaseRequest& request, double now) {
  // Already known: declared and staged in with its job (or announced before).
  if (find_read(request.app, request.index) != reads_.end()) return;
  track_read(request, now);
}

void Scheduler::start_prefetch(const PhaseRequest& request, double requested,
                               const std::vector<BufferId>& buffers, double now) {
  const double share = request.bytes / static_cast<double>(buffers.size());
  for (BufferId b : buffers) {
    auto& buf = buffers_.at(static_cast<size_t>(b));
    // The stage-in is a stream on the buffer's device, and the space is taken from its start.
    buf.used += share;
    buf.phases += 1;
    buf.held.push_back({request.app, request.index, share, false, true});
  }
  apps_[static_cast<size_t>(request.app)].held_bytes += request.bytes;
  running_.push_back({request, buffers, requested, now, true});
  recorder_.prefetch_started(request.app, request.index, request.bytes, now);
  actions_.start_prefetch(request, buffers);
}

void Scheduler::on_prefetched(AppId app, int index, double now) {
  const auto it = find_running(running_, app, index, /*prefetch=*/true);
  if (it == running_.end()) throw std::logic_error("prefetch that is not running completed");
  for (BufferId b : it->buffers) buffers_[static_cast<size_t>(b)].phases -= 1;
  const auto read = find_read(app, index);
  read->stage = ReadPhase::Stage::Ready;
  read->buffers = it->buffers;
  running_.erase(it);
  recorder_.prefetch_done(app, index, now);
  if (apps_[static_cast<size_t>(app)].ended) {
    // Its application left without reading it.
    for (BufferId b : read->buffers) release_clean(b, app, index);
    reads_.erase(read);
    settle_if_drained(app, now);
    return;
  }
  auto& staging = staging_in_[static_cast<size_t>(app)];
  if (staging > 0 && --staging == 0) {
    recorder_.app_started(app, now);
    actions_.admit(app);
  }
}

void Scheduler::start_ready_reads(double now) {
  for (auto& r : reads_)
    if (r.requested && r.stage == ReadPhase::Stage::Ready) {
      r.stage = ReadPhase::Stage::Running;
      start_phase(r.request, r.requested_at, r.buffers, now);
    }
}

void Scheduler::on_phase_request(const PhaseRequest& request, double now) {
  const auto& app = apps_.at(static_cast<size_t>(request.app));
  if (!app.admitted || app.ended || staging_in_[static_cast<size_t>(request.app)] > 0)
    throw std::logic_error("phase request from an application that is not running");
  if (!(request.bytes > 0)) throw std::invalid_argument("phase size must be > 0");
  if (request.op == Op::Read) {
    // The policy placed (or places) the read with its prefetch; the read starts once the data is
    // on the buffers, at the next decision.
    auto read = find_read(request.app, request.index);
    ReadPhase& r = read != reads_.end() ? *read : track_read(request, now);
    if (r.requested) throw std::logic_error("read phase requested twice");
    r.requested = true;
    r.requested_at = now;
  } else {
    pending_.push_back({request, now});
  }
  recorder_.phase_requested(request.app, request.index, request.bytes, now, request.op);
}

void Scheduler::grant(AppId app, int index, const std::vector<BufferId>& buffers, double now) {
  const auto it = std::find_if(pending_.begin(), pending_.end(), [&](const PendingPhase& p) {
    return p.request.app == app && p.request.index == index;
  });
  if (it == pending_.end()) throw std::logic_error("grant of a phase that is not pending");
  if (buffers.empty()) throw std::logic_error("grant on no buffer");
  const PendingPhase phase = *it;
  pending_.erase(it);

  if (phase.request.op == Op::Read) {
    find_read(app, index)->stage = ReadPhase::Stage::Prefetching;
    start_prefetch(phase.request, phase.requested, buffers, now);
    return;
  }
  const double share = phase.request.bytes / static_cast<double>(buffers.size());
  for (BufferId b : buffers) {
    auto& buf = buffers_.at(static_cast<size_t>(b));
    buf.used += share;
    buf.held.push_back({app, index, share, false});
  }
  apps_[static_cast<size_t>(app)].held_bytes += phase.request.bytes;
  auto& written = written_[static_cast<size_t>(app)];
  if (written.size() <= static_cast<size_t>(index)) written.resize(static_cast<size_t>(index) + 1);
  written[static_cast<size_t>(index)] = phase.request.bytes;
  start_phase(phase.request, phase.requested, buffers, now);
}

void Scheduler::start_phase(const PhaseRequest& request, double requested,
                            const std::vector<BufferId>& buffers, double now) {
  for (BufferId b : buffers) {
    auto& buf = buffers_.at(static_cast<size_t>(b));
    buf.phases += 1;
    if (drain_mode() == DrainMode::YieldToIO && buf.draining) {
      buf.draining = false;
      actions_.stop_drain(b);
      recorder_.drain_stopped(b, now);
    }
  }
  recorder_.phase_granted(request.app, request.index, buffers, io_alone(request, buffers.size()),
                          now);
  running_.push_back({request, buffers, requested, now});
  actions_.grant(request, buffers);
}

double Scheduler::io_alone(const PhaseRequest& request, size_t buffers) const {
  const Candidate alone{
      request.bytes, request.op, 0,
      apps_[static_cast<size_t>(request.app)].info.nodes * config_.client_node_bw};
  const std::vector<BufferSlot> empty(buffers);
  return predict(alone, 1, empty, config_.buffer_device, config_.buffer_link_bw).io_alone;
}

const RunningPhase* Scheduler::running_phase(AppId app, int index) const {
  const auto it = find_running(running_, app, index, /*prefetch=*/false);
  return it == running_.end() ? nullptr : &*it;
}

void Scheduler::on_phase_complete(AppId app, int index, double now) {
  const auto it = find_running(running_, app, index, /*prefetch=*/false);
  if (it == running_.end()) throw std::logic_error("completion of a phase that is not running");
  const bool drainable = drain_before_app_end(app);
  auto& owner = apps_[static_cast<size_t>(app)];
  for (BufferId b : it->buffers) buffers_[static_cast<size_t>(b)].phases -= 1;
  if (it->request.op == Op::Read) {
    const auto read = find_read(app, index);
    if (read->from_source) {
      pin_phase(app, it->request.source_phase, false);
    } else if (owner.info.hint != Hint::Cached && !stages_in_before_start()) {
      // Staged-in data is a copy of the PFS: nothing to drain, the space is free again. The
      // cached hint, and a batch reservation, keep it until the application ends.
      for (BufferId b : it->buffers) release_clean(b, app, index);
    }
    reads_.erase(read);
  } else {
    for (BufferId b : it->buffers)
      for (auto& h : buffers_[static_cast<size_t>(b)].held)
        if (h.app == app && h.phase == index) h.drainable = drainable;
  }
  running_.erase(it);
  recorder_.phase_completed(app, index, now);
}

void Scheduler::on_drained(BufferId buffer, double bytes, double now) {
  auto& buf = buffers_.at(static_cast<size_t>(buffer));
  recorder_.drained(buffer, bytes, now);
  std::vector<AppId> touched;
  for (auto it = buf.held.begin(); it != buf.held.end() && bytes > 0;) {
    if (!it->drainable) {
      ++it;
      continue;
    }
    const double taken = std::min(bytes, it->bytes);
    it->bytes -= taken;
    bytes -= taken;
    buf.used = std::max(0.0, buf.used - taken);
    apps_[static_cast<size_t>(it->app)].held_bytes -= taken;
    touched.push_back(it->app);
    if (it->bytes <= kByteEpsilon) {
      buf.used = std::max(0.0, buf.used - it->bytes);
      apps_[static_cast<size_t>(it->app)].held_bytes -= it->bytes;
      it = buf.held.erase(it);
    } else {
      ++it;
    }
  }
  buf.forget_dust_if_empty();
  stop_drain_if_done(buffer, now);
  for (AppId a : touched) settle_if_drained(a, now);
}

void Scheduler::on_app_end(AppId app, double now) {
  auto& state = apps_.at(static_cast<size_t>(app));
  if (state.ended) throw std::logic_error("application ended twice");
  state.ended = true;
  running_apps_.erase(app);
  ++ended_apps_;
  nodes_in_use_ -= nodes_needed(app);
  recorder_.app_ended(app, now);
  // Reads it announced (or declared) and never did: their prefetches are dropped, and a
  // stage-in under way is released when it completes.
  for (auto r = reads_.begin(); r != reads_.end();) {
    if (r->request.app != app || r->stage == ReadPhase::Stage::Prefetching) {
      ++r;
      continue;
    }
    if (r->stage == ReadPhase::Stage::Running)
      throw std::logic_error("application ended during its read phase");
    if (r->from_source) pin_phase(app, r->request.source_phase, false);
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [&](const PendingPhase& p) {
                                    return p.request.app == app &&
                                           p.request.index == r->request.index;
                                  }),
                   pending_.end());
    r = reads_.erase(r);
  }
  std::vector<int> staging;  // prefetches still writing: released when they complete
  for (const auto& r : reads_)
    if (r.request.app == app) staging.push_back(r.request.index);
  for (BufferId b = 0; b < config_.buffer_count; ++b) {
    auto& held = buffers_[static_cast<size_t>(b)].held;
    std::vector<int> copies;
    for (const auto& h : held)
      if (h.app == app && h.clean &&
          std::find(staging.begin(), staging.end(), h.phase) == staging.end())
        copies.push_back(h.phase);
    for (int index : copies) release_clean(b, app, index);
    for (auto& h : held)
      if (h.app == app && !h.clean) h.drainable = true;
  }
  settle_if_drained(app, now);
  // The paper's admission limit: "the rest of the apps will be scheduled once one of the
  // previous apps finishes" (IV-B1).
  admit_waiting(now);
  if (config_.compute_nodes > 0) on_nodes_freed(now);
}

void Scheduler::on_nodes_freed(double) {}

void Scheduler::on_held_reported(BufferId buffer, AppId app, double bytes, double now) {
  auto& buf = buffers_.at(static_cast<size_t>(buffer));
  auto& owner = apps_.at(static_cast<size_t>(app));
  const bool running = std::any_of(running_.begin(), running_.end(), [&](const RunningPhase& p) {
    return p.request.app == app &&
           std::find(p.buffers.begin(), p.buffers.end(), buffer) != p.buffers.end();
  });
  if (running) return;
  const auto written = [app](const HeldData& h) { return h.app == app && !h.clean; };
  double counted = 0;
  for (const auto& h : buf.held)
    if (written(h)) counted += h.bytes;
  const double delta = bytes - counted;
  if (std::abs(delta) <= kByteEpsilon) return;
  if (delta > 0) {
    // More than counted: the newest of the app's data there grows, or new data appears (from
    // no phase the policy placed there; phase -1 matches none).
    const auto last = std::find_if(buf.held.rbegin(), buf.held.rend(), written);
    if (last != buf.held.rend())
      last->bytes += delta;
    else
      buf.held.push_back({app, -1, delta, owner.ended || drain_before_app_end(app)});
  } else {
    // Less: the oldest data went first (drains run in arrival order).
    double excess = -delta;
    for (auto it = buf.held.begin(); it != buf.held.end() && excess > kByteEpsilon;) {
      if (!written(*it)) {
        ++it;
        continue;
      }
      const double taken = std::min(excess, it->bytes);
      it->bytes -= taken;
      excess -= taken;
      it = it->bytes <= kByteEpsilon ? buf.held.erase(it) : std::next(it);
    }
  }
  buf.used = std::max(0.0, buf.used + delta);
  buf.forget_dust_if_empty();
  owner.held_bytes = std::max(0.0, owner.held_bytes + delta);
  stop_drain_if_done(buffer, now);
  settle_if_drained(app, now);
}

void Scheduler::release_clean(BufferId buffer, AppId app, std::optional<int> index) {
  auto& buf = buffers_[static_cast<size_t>(buffer)];
  auto& owner = apps_[static_cast<size_t>(app)];
  for (auto h = buf.held.begin(); h != buf.held.end();) {
    if (h->clean && h->app == app && (!index || h->phase == *index)) {
      buf.used = std::max(0.0, buf.used - h->bytes);
      owner.held_bytes -= h->bytes;
      h = buf.held.erase(h);
    } else {
      ++h;
    }
  }
  buf.forget_dust_if_empty();
}

void Scheduler::stop_drain_if_done(BufferId buffer, double now) {
  auto& buf = buffers_[static_cast<size_t>(buffer)];
  if (!buf.draining || buf.drainable() > kByteEpsilon) return;
  buf.draining = false;
  buf.exclusive_flush = false;
  actions_.stop_drain(buffer);
  recorder_.drain_stopped(buffer, now);
}

void Scheduler::settle_if_drained(AppId app, double now) {
  auto& state = apps_[static_cast<size_t>(app)];
  if (!state.ended || state.drained || state.held_bytes > kByteEpsilon) return;
  state.held_bytes = 0;
  state.drained = true;
  on_app_drained(app, now);
}

bool Scheduler::drain_before_app_end(AppId app) const {
  return apps_.at(static_cast<size_t>(app)).info.hint == Hint::Flushable;
}

void Scheduler::on_app_drained(AppId, double) {}

bool Scheduler::placeable(BufferId buffer, AppId app) const {
  const auto& buf = buffers_.at(static_cast<size_t>(buffer));
  if (buf.exclusive_flush) return false;
  return std::none_of(buf.held.begin(), buf.held.end(), [&](const HeldData& h) {
    const auto& owner = apps_[static_cast<size_t>(h.app)];
    return h.app != app && owner.info.hint == Hint::Cached && !owner.ended;
  });
}

bool Scheduler::holds_cached(AppId app) const {
  if (apps_[static_cast<size_t>(app)].info.hint != Hint::Cached) return false;
  return std::any_of(buffers_.begin(), buffers_.end(), [&](const BufferState& b) {
    return std::any_of(b.held.begin(), b.held.end(),
                       [&](const HeldData& h) { return h.app == app; });
  });
}

bool Scheduler::fits_somewhere(double bytes, AppId app) const {
  std::vector<double> free;
  for (BufferId b = 0; b < config_.buffer_count; ++b)
    if (placeable(b, app)) free.push_back(buffers_[static_cast<size_t>(b)].free());
  std::sort(free.begin(), free.end(), std::greater<>());
  for (size_t j = static_cast<size_t>(config_.min_buffers); j <= free.size(); ++j)
    if (bytes / static_cast<double>(j) <= free[j - 1]) return true;
  return false;
}

void Scheduler::grant_on_every_buffer(double now) {
  std::vector<BufferId> all(static_cast<size_t>(config_.buffer_count));
  for (BufferId b = 0; b < config_.buffer_count; ++b) all[static_cast<size_t>(b)] = b;
  const auto waiting = pending_;  // grant() removes from pending_
  for (const auto& p : waiting) {
    const double share = p.request.bytes / config_.buffer_count;
    if (std::all_of(buffers_.begin(), buffers_.end(),
                    [&](const BufferState& b) { return b.free() >= share; }))
      grant(p.request.app, p.request.index, all, now);
  }
}

bool Scheduler::capacity_pressure() const {
  if (pending_.empty()) return false;
  // What fits_somewhere asks of every pending phase, with the buffers looked at once: those no
  // application's phase is kept off ("open": not flushing exclusively, holding no running
  // application's cached data) are shared by all, so their free space is sorted once. Only an
  // application whose own cached data keeps a buffer to itself needs its own look.
  std::vector<double> open_free;
  std::vector<AppId> keeps;  ///< the applications some buffer is kept for (only they place there)
  for (BufferId b = 0; b < config_.buffer_count; ++b) {
    const auto& buf = buffers_[static_cast<size_t>(b)];
    if (buf.exclusive_flush) continue;
    std::optional<AppId> keeper;
    bool shut = false;  // the cached data of two applications: nobody else's phase goes there
    for (const HeldData& h : buf.held) {
      const auto& owner = apps_[static_cast<size_t>(h.app)];
      if (owner.info.hint != Hint::Cached || owner.ended) continue;
      if (keeper && *keeper != h.app) shut = true;
      keeper = h.app;
    }
    if (!keeper)
      open_free.push_back(buf.free());
    else if (!shut)
      keeps.push_back(*keeper);
  }
  std::sort(open_free.begin(), open_free.end(), std::greater<>());
  const auto min_buffers = static_cast<size_t>(config_.min_buffers);
  // The most a phase striped over the j fullest-free open buffers may hold is j times the j-th
  // free space; the exact test (bytes / j <= free[j - 1]) is run only near that bound.
  double bound = -std::numeric_limits<double>::infinity();
  for (size_t j = min_buffers; j <= open_free.size(); ++j)
    bound = std::max(bound, static_cast<double>(j) * open_free[j - 1]);
  const auto fits_open = [&](double bytes) {
    if (bytes >= 0 && bound >= 0 && bytes < bound * (1 - 1e-9)) return true;
    if (bytes >= 0 && bytes > bound * (1 + 1e-9) + 1e-300) return false;
    for (size_t j = min_buffers; j <= open_free.size(); ++j)
      if (bytes / static_cast<double>(j) <= open_free[j - 1]) return true;
    return false;
  };
  return std::any_of(pending_.begin(), pending_.end(), [&](const PendingPhase& p) {
    if (std::find(keeps.begin(), keeps.end(), p.request.app) != keeps.end())
      return !fits_somewhere(p.request.bytes, p.request.app);
    return !fits_open(p.request.bytes);
  });
}

void Scheduler::on_tick(double now) {
  capacity_blocked_ = false;
  assign_flushers();
  auto held_back = hold_back_yielding(now);
  start_ready_reads(now);
  decide(now);
  start_one_if_stuck(now);
  restore_held_back(std::move(held_back));
  update_drains(now);
  for (BufferId b = 0; b < config_.buffer_count; ++b) {
    const auto& buf = buffers_[static_cast<size_t>(b)];
    recorder_.buffer_changed(b, buf.phases > 0, buf.used, now);
  }
}

void Scheduler::start_one_if_stuck(double now) {
  if (stages_in_before_start() || !running_.empty() || pending_.empty()) return;
  if (std::any_of(buffers_.begin(), buffers_.end(),
                  [](const BufferState& b) { return b.drainable() > kByteEpsilon; }))
    return;  // draining frees space: the policy's wait can end
  const PendingPhase first = pending_.front();
  std::vector<BufferId> candidates;
  for (BufferId b = 0; b < config_.buffer_count; ++b)
    if (placeable(b, first.request.app)) candidates.push_back(b);
  std::stable_sort(candidates.begin(), candidates.end(), [&](BufferId a, BufferId b) {
    return buffers_[static_cast<size_t>(a)].free() > buffers_[static_cast<size_t>(b)].free();
  });
  for (size_t j = static_cast<size_t>(config_.min_buffers); j <= candidates.size(); ++j) {
    if (first.request.bytes / static_cast<double>(j) >
        buffers_[static_cast<size_t>(candidates[j - 1])].free())
      continue;
    std::vector<BufferId> chosen(candidates.begin(), candidates.begin() + static_cast<long>(j));
    std::sort(chosen.begin(), chosen.end());
    grant(first.request.app, first.request.index, chosen, now);
    return;
  }
}

std::vector<PendingPhase> Scheduler::hold_back_yielding(double now) {
  next_release_.reset();
  const auto patience = [&](AppId app) { return apps_[static_cast<size_t>(app)].info.io_slowdown; };
  double least = std::numeric_limits<double>::infinity();
  for (const auto& p : pending_) least = std::min(least, patience(p.request.app));
  for (const auto& r : running_) least = std::min(least, patience(r.request.app));
  std::vector<PendingPhase> visible, held;
  // Most runs have one class: then nothing yields and the queue is left as it is.
  if (std::none_of(pending_.begin(), pending_.end(),
                   [&](const PendingPhase& p) { return patience(p.request.app) > least; }))
    return held;
  for (const auto& p : pending_) {
    const double slowdown = patience(p.request.app);
    if (slowdown <= least) {
      visible.push_back(p);
      continue;
    }
    // Half the slack the job accepted goes to waiting, the other half to the interference it may
    // meet once it runs (the estimate is for its phase alone on the minimum of buffers).
    const double release =
        p.requested +
        (slowdown - 1) * io_alone(p.request, static_cast<size_t>(config_.min_buffers)) / 2;
    if (now < release) {
      held.push_back(p);
      next_release_ = std::min(next_release_.value_or(release), release);
    } else {
      visible.push_back(p);
    }
  }
  pending_ = std::move(visible);
  return held;
}

void Scheduler::restore_held_back(std::vector<PendingPhase> held) {
  if (held.empty()) return;
  const auto visible = static_cast<std::ptrdiff_t>(pending_.size());
  pending_.insert(pending_.end(), held.begin(), held.end());
  std::inplace_merge(
      pending_.begin(), pending_.begin() + visible, pending_.end(),
      [](const PendingPhase& a, const PendingPhase& b) { return a.requested < b.requested; });
}

void Scheduler::assign_flushers() {
  // Section V-D: a buffer that reaches the threshold becomes a backup flusher while a flusher
  // slot is free, fullest first; it takes no new phase until it has drained.
  const int slots = backup_flushers();
  std::vector<BufferId> ready;
  int flushers = 0;
  for (BufferId id = 0; id < config_.buffer_count; ++id) {
    auto& buf = buffers_[static_cast<size_t>(id)];
    const bool has_data = buf.drainable() > kByteEpsilon;
    if (buf.exclusive_flush && !has_data) buf.exclusive_flush = false;
    flushers += buf.exclusive_flush ? 1 : 0;
    if (!buf.exclusive_flush && has_data && buf.used >= flush_threshold() * buf.capacity)
      ready.push_back(id);
  }
  std::stable_sort(ready.begin(), ready.end(), [&](BufferId a, BufferId b) {
    return buffers_[static_cast<size_t>(a)].used > buffers_[static_cast<size_t>(b)].used;
  });
  for (BufferId id : ready) {
    if (flushers >= slots) break;
    buffers_[static_cast<size_t>(id)].exclusive_flush = true;
    ++flushers;
  }
}

void Scheduler::update_drains(double now) {
  // Data waits on the buffers only for running applications; once none runs, everything drains.
  const bool pressure = capacity_blocked_ || capacity_pressure() || ended_apps_ == apps_.size();
  const double threshold = flush_threshold();
  for (BufferId id = 0; id < config_.buffer_count; ++id) {
    auto& buf = buffers_[static_cast<size_t>(id)];
    const bool has_data = buf.drainable() > kByteEpsilon;
    const bool over_threshold = buf.used >= threshold * buf.capacity;
    // With backup flushers only the flushers drain, unless space runs out.
    const bool triggered =
        backup_flushers() > 0 ? buf.exclusive_flush || pressure : over_threshold || pressure;
    // Yielding drains still run when space has run out: otherwise nothing could progress.
    const bool blocked = drain_mode() == DrainMode::YieldToIO && buf.phases > 0 && !pressure;
    const bool want = has_data && triggered && !blocked;
    if (want && !buf.draining) {
      buf.draining = true;
      recorder_.drain_started(id, now);
      actions_.start_drain(id);
    } else if (!want && buf.draining) {
      buf.draining = false;
      recorder_.drain_stopped(id, now);
      actions_.stop_drain(id);
    }
  }
}

}  // namespace harmonia::core
