#include "core/lookahead.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "core/registry.hpp"

namespace harmonia::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Events closer than this (seconds) are one instant: the policy decides once for them.
constexpr double kSameInstant = 1e-9;

/// How close to `t` two events are one instant: 1 ns, or 4 epsilons of `t` (4 to 8 units in the
/// last place) once that is coarser, from about 13 days on. Past 2^24 s (194 days) a double holds
/// a time only to 4 ns: with a fixed 1 ns, a phase a few ns from its end would never end, since
/// `t + dt` rounds back to `t`, and the forecast would spin to `max_events`.
double same_instant(double t) {
  return std::max(kSameInstant, 4 * std::numeric_limits<double>::epsilon() * std::abs(t));
}

const std::vector<std::pair<std::string, AutoObjective>>& objectives() {
  static const std::vector<std::pair<std::string, AutoObjective>> table = {
      {"makespan", AutoObjective::Makespan},
      {"mean_completion", AutoObjective::MeanCompletion},
      {"stall", AutoObjective::Stall},
      {"slowdown", AutoObjective::Slowdown},
  };
  return table;
}

/// Collects the forecast policy's grants; drains are read from the scheduler's own flags.
class FluidActions : public Actions {
 public:
  struct Grant {
    PhaseRequest request;
    std::vector<BufferId> buffers;
    bool prefetch = false;
  };
  std::vector<Grant> grants;

  void admit(AppId) override {}
  void grant(const PhaseRequest& phase, const std::vector<BufferId>& buffers) override {
    grants.push_back({phase, buffers, false});
  }
  void start_prefetch(const PhaseRequest& phase, const std::vector<BufferId>& buffers) override {
    grants.push_back({phase, buffers, true});
  }
  void start_drain(BufferId) override {}
  void stop_drain(BufferId) override {}
};

struct Stream {
  PhaseRequest request;
  std::vector<BufferId> buffers;
  double remaining = 0;
  double client_bw = 0;
  /// A read phase's stage-in: a stream into its buffers like a write, which ends in
  /// `on_prefetched` (the PFS side of it is not modelled here).
  bool prefetch = false;
};

/// The fluid rates of the phases and drains in progress: the same rule as the optimizer's
/// predictions (optimizer.cpp `predict`), applied to what actually runs on each buffer.
struct Rates {
  std::vector<double> phase;
  std::vector<double> drain;
};

Rates rates(const std::vector<Stream>& streams, const std::vector<BufferState>& buffers,
            const SchedulerConfig& config) {
  std::vector<int> phases_on(buffers.size(), 0);
  for (const auto& s : streams)
    for (BufferId b : s.buffers) phases_on[static_cast<size_t>(b)] += 1;
  auto drains_on = [&](size_t b) {
    return buffers[b].draining && buffers[b].drainable() > kByteEpsilon ? 1 : 0;
  };
  Rates r;
  for (const auto& s : streams) {
    double slowest = kInfinity;
    for (BufferId id : s.buffers) {
      const auto b = static_cast<size_t>(id);
      double share = config.buffer_device.stream_bw(phases_on[b] + drains_on(b), s.request.op);
      if (config.buffer_link_bw > 0) share = std::min(share, config.buffer_link_bw / phases_on[b]);
      slowest = std::min(slowest, share);
    }
    double rate = slowest * static_cast<double>(s.buffers.size());
    if (s.client_bw > 0) rate = std::min(rate, s.client_bw);
    r.phase.push_back(rate);
  }
  for (size_t b = 0; b < buffers.size(); ++b)
    r.drain.push_back(drains_on(b) ? config.buffer_device.stream_bw(phases_on[b] + 1, Op::Read)
                                   : 0.0);
  return r;
}

}  // namespace

AutoObjective parse_auto_objective(const std::string& name) {
  for (const auto& [key, objective] : objectives())
    if (key == name) return objective;
  throw std::invalid_argument("auto.objective: unknown objective '" + name +
                              "' (makespan, mean_completion, stall or slowdown)");
}

std::vector<std::string> auto_objective_names() {
  std::vector<std::string> names;
  for (const auto& entry : objectives()) names.push_back(entry.first);
  return names;
}

double Forecast::value(AutoObjective objective) const {
  if (!complete) return kInfinity;
  switch (objective) {
    case AutoObjective::Makespan:
      return makespan;
    case AutoObjective::MeanCompletion:
      return mean_completion;
    case AutoObjective::Stall:
      return stall;
    case AutoObjective::Slowdown:
      return slowdown;
  }
  return kInfinity;
}

void Lookahead::swap_state(Scheduler& a, Scheduler& b) {
  std::swap(a.buffers_, b.buffers_);
  std::swap(a.apps_, b.apps_);
  std::swap(a.pending_, b.pending_);
  std::swap(a.running_, b.running_);
  std::swap(a.waiting_, b.waiting_);
  std::swap(a.running_apps_, b.running_apps_);
  std::swap(a.ended_apps_, b.ended_apps_);
  std::swap(a.nodes_in_use_, b.nodes_in_use_);
  std::swap(a.reads_, b.reads_);
  std::swap(a.staging_in_, b.staging_in_);
  std::swap(a.written_, b.written_);
  std::swap(a.next_release_, b.next_release_);
  std::swap(a.recorder_, b.recorder_);
  a.capacity_blocked_ = false;
  b.capacity_blocked_ = false;
}

namespace {

/// The applications a look-ahead from `s`'s state can touch, in increasing id order: those
/// running, those with data on a buffer or a phase pending, running or read, and those of the
/// expected iterations. The others have ended and drained, or wait for admission: no application
/// ends in a forecast, so none is admitted, and a queue of any length costs the forecast nothing.
std::vector<AppId> live_apps(const std::set<AppId>& running,
                             const std::vector<BufferState>& buffers,
                             const std::vector<PendingPhase>& pending,
                             const std::vector<RunningPhase>& in_progress,
                             const std::vector<ReadPhase>& reads,
                             const std::vector<ExpectedIteration>& next) {
  std::vector<AppId> live(running.begin(), running.end());
  for (const auto& b : buffers)
    for (const auto& h : b.held) live.push_back(h.app);
  for (const auto& p : pending) live.push_back(p.request.app);
  for (const auto& r : in_progress) live.push_back(r.request.app);
  for (const auto& r : reads) live.push_back(r.request.app);
  for (const auto& e : next) live.push_back(e.app);
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  return live;
}

}  // namespace

std::vector<AppId> Lookahead::copy_live_state(const Scheduler& from, Scheduler& to,
                                              const std::vector<ExpectedIteration>& next) {
  const auto live =
      live_apps(from.running_apps_, from.buffers_, from.pending_, from.running_, from.reads_, next);
  const auto renumbered = [&](AppId app) {
    return static_cast<AppId>(std::lower_bound(live.begin(), live.end(), app) - live.begin());
  };
  to.buffers_ = from.buffers_;
  for (auto& b : to.buffers_)
    for (auto& h : b.held) h.app = renumbered(h.app);
  to.apps_.clear();
  to.staging_in_.clear();
  to.written_.clear();
  to.ended_apps_ = 0;
  for (AppId app : live) {
    const auto a = static_cast<size_t>(app);
    to.apps_.push_back(from.apps_[a]);
    to.staging_in_.push_back(from.staging_in_[a]);
    to.written_.push_back(from.written_[a]);
    to.ended_apps_ += from.apps_[a].ended ? 1 : 0;
  }
  to.pending_ = from.pending_;
  for (auto& p : to.pending_) p.request.app = renumbered(p.request.app);
  to.running_ = from.running_;
  for (auto& r : to.running_) r.request.app = renumbered(r.request.app);
  to.reads_ = from.reads_;
  for (auto& r : to.reads_) r.request.app = renumbered(r.request.app);
  to.waiting_.clear();
  to.running_apps_.clear();
  for (AppId app : from.running_apps_) to.running_apps_.insert(renumbered(app));
  to.nodes_in_use_ = from.nodes_in_use_;
  to.next_release_ = from.next_release_;
  to.recorder_ = from.recorder_.live_part(live);
  to.capacity_blocked_ = false;
  return live;
}

void Lookahead::decide(Scheduler& s, double now) {
  s.capacity_blocked_ = false;
  s.decide(now);
}

Forecast Lookahead::forecast(const std::string& policy, const Scheduler& from, double now,
                             const std::vector<ExpectedIteration>& next, int max_events) {
  FluidActions actions;
  const auto sim = make_scheduler(policy, from.config_, actions);
  // The forecast runs on the applications it can touch only, renumbered in the same order (so
  // that every tie a policy breaks by id falls the same way): its cost follows what is in the
  // system now, not how long the run has been.
  const auto live = copy_live_state(from, *sim, next);
  const auto renumbered = [&](AppId app) {
    return static_cast<AppId>(std::lower_bound(live.begin(), live.end(), app) - live.begin());
  };
  const auto& config = sim->config_;
  auto client_bw = [&](AppId app) {
    return sim->apps_[static_cast<size_t>(app)].info.nodes * config.client_node_bw;
  };

  // The phases the forecast follows, and when each application's next iteration asks.
  std::vector<std::pair<AppId, int>> followed;
  std::vector<Stream> streams;
  for (const auto& r : sim->running_) {
    streams.push_back(
        {r.request, r.buffers, r.request.bytes, client_bw(r.request.app), r.prefetch});
    if (!r.prefetch) followed.emplace_back(r.request.app, r.request.index);
  }
  // The scheduler does not know how far a running phase got: assume it ran at today's rate
  // since its grant (and keep at least 1 % to write).
  const Rates now_rates = rates(streams, sim->buffers_, config);
  for (size_t k = 0; k < streams.size(); ++k) {
    const double elapsed = now - sim->running_[k].granted;
    streams[k].remaining =
        std::max(0.01 * streams[k].remaining, streams[k].remaining - now_rates.phase[k] * elapsed);
  }
  for (const auto& p : sim->pending_) followed.emplace_back(p.request.app, p.request.index);

  // Each application's iterations still to ask, in order; the first of an idle application is
  // due now, the others when the phase before them ends.
  std::map<AppId, std::deque<ExpectedIteration>> to_come;
  for (auto e : next) {
    e.app = renumbered(e.app);
    to_come[e.app].push_back(e);
  }
  std::vector<std::pair<double, ExpectedIteration>> requests;
  for (auto& [app, queue] : to_come) {
    if (queue.front().idle_since < 0) continue;
    requests.emplace_back(std::max(now, queue.front().idle_since + queue.front().gap),
                          queue.front());
    queue.pop_front();
  }

  double t = now;
  Forecast out;
  sim->on_tick(t);
  for (; out.events < max_events; ++out.events) {
    for (auto& g : actions.grants)
      streams.push_back(
          {g.request, g.buffers, g.request.bytes, client_bw(g.request.app), g.prefetch});
    actions.grants.clear();

    const Rates r = rates(streams, sim->buffers_, config);
    double next_event = kInfinity;
    for (size_t k = 0; k < streams.size(); ++k)
      if (r.phase[k] > 0) next_event = std::min(next_event, t + streams[k].remaining / r.phase[k]);
    for (size_t b = 0; b < r.drain.size(); ++b)
      if (r.drain[b] > 0)
        next_event = std::min(next_event, t + sim->buffers_[b].drainable() / r.drain[b]);
    for (const auto& [at, e] : requests) next_event = std::min(next_event, at);
    if (!std::isfinite(next_event)) {
      out.complete = streams.empty() && sim->pending_.empty() && requests.empty() &&
                     std::all_of(to_come.begin(), to_come.end(),
                                 [](const auto& entry) { return entry.second.empty(); });
      break;
    }

    const double dt = next_event - t;
    t = next_event;
    const double instant = same_instant(t);
    for (size_t b = 0; b < r.drain.size(); ++b) {
      if (r.drain[b] <= 0) continue;
      const double drainable = sim->buffers_[b].drainable();
      const bool done = drainable / r.drain[b] <= dt + instant;
      sim->on_drained(static_cast<BufferId>(b), done ? drainable : r.drain[b] * dt, t);
    }
    std::vector<Stream> still;
    for (size_t k = 0; k < streams.size(); ++k) {
      auto& s = streams[k];
      const bool done = r.phase[k] > 0 && s.remaining / r.phase[k] <= dt + instant;
      if (!done) {
        s.remaining -= r.phase[k] * dt;
        still.push_back(std::move(s));
        continue;
      }
      if (s.prefetch) {
        sim->on_prefetched(s.request.app, s.request.index, t);
        continue;
      }
      sim->on_phase_complete(s.request.app, s.request.index, t);
      auto& queue = to_come[s.request.app];
      if (!queue.empty()) {
        requests.emplace_back(t + queue.front().gap, queue.front());
        queue.pop_front();
      }
    }
    streams = std::move(still);
    for (auto it = requests.begin(); it != requests.end();) {
      if (it->first > t + instant) {
        ++it;
        continue;
      }
      const auto& e = it->second;
      const int priority = sim->apps_[static_cast<size_t>(e.app)].info.priority;
      sim->on_phase_request({e.app, e.index, e.bytes, e.op, priority}, t);
      followed.emplace_back(e.app, e.index);
      it = requests.erase(it);
    }
    sim->on_tick(t);
  }

  // The metrics of the followed phases, from the forecast's record.
  std::map<AppId, double> last_end;
  const auto& records = sim->recorder_.phases();
  double stall = 0, slowdown = 0;
  for (const auto& [app, index] : followed) {
    const auto& mine = sim->recorder_.phases_of(app);
    const auto at = std::find_if(mine.rbegin(), mine.rend(),
                                 [&](size_t k) { return records[k].index == index; });
    const PhaseRecord* rec = at == mine.rend() ? nullptr : &records[*at];
    if (rec == nullptr || rec->end < 0) {
      out.complete = false;
      continue;
    }
    out.followed.push_back({live[static_cast<size_t>(app)], index, rec->requested, rec->granted,
                            rec->end, rec->io_alone});
    const double turnaround = rec->end - rec->requested;
    stall += std::max(0.0, turnaround - rec->io_alone);
    slowdown += rec->io_alone > 0 ? turnaround / rec->io_alone : 1.0;
    last_end[app] = std::max(last_end[app], rec->end - now);
    out.makespan = std::max(out.makespan, rec->end - now);
    out.phases += 1;
  }
  if (out.phases > 0) {
    double completions = 0;
    for (const auto& [app, end] : last_end) completions += end;
    out.mean_completion = completions / static_cast<double>(last_end.size());
    out.stall = stall / static_cast<double>(last_end.size());
    out.slowdown = slowdown / out.phases;
  }
  return out;
}

}  // namespace harmonia::core
