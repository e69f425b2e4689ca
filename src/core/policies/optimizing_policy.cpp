#include "core/policies/optimizing_policy.hpp"

#include <algorithm>
#include <numeric>

namespace harmonia::core {

OptimizingPolicy::OptimizingPolicy(SchedulerConfig config, Actions& actions, PolicyTraits traits)
    : Scheduler(std::move(config), actions), traits_(std::move(traits)), rng_(config_.seed) {
  if (traits_.exclusive) max_colocated_ = 1;
}

double OptimizingPolicy::order_key(const PendingPhase& p) {
  if (traits_.order == CandidateOrder::Fcfs) return p.requested;
  const long long id = (static_cast<long long>(p.request.app) << 32) | p.request.index;
  const auto [it, inserted] = random_keys_.try_emplace(id, 0.0);
  if (inserted) it->second = std::uniform_real_distribution<double>(0, 1)(rng_);
  return it->second;
}

void OptimizingPolicy::decide(double now) {
  if (pending_.empty()) return;
  // Candidates in policy order; ties (same key) by application then phase for determinism.
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < pending_.size(); ++i) order.emplace_back(order_key(pending_[i]), i);
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const auto& ra = pending_[a.second].request;
    const auto& rb = pending_[b.second].request;
    return std::tie(a.first, ra.app, ra.index) < std::tie(b.first, rb.app, rb.index);
  });
  if (order.size() > kMaxCandidates) order.resize(kMaxCandidates);

  // A buffer holding an application's cached data takes only that application's phases (section
  // IV-B, read-after-write hint): each such application is planned on its own, on the buffers it
  // may use, then the others together on the buffers everybody may use.
  std::vector<AppId> owners;
  std::vector<size_t> others;
  for (const auto& [key, i] : order) {
    const AppId app = pending_[i].request.app;
    if (!holds_cached(app))
      others.push_back(i);
    else if (std::find(owners.begin(), owners.end(), app) == owners.end())
      owners.push_back(app);
  }
  std::vector<PhaseRequest> others_requests;
  for (size_t i : others) others_requests.push_back(pending_[i].request);
  for (AppId owner : owners) {
    std::vector<size_t> mine;
    for (const auto& [key, i] : order)
      if (pending_[i].request.app == owner) mine.push_back(i);
    decide_among(mine, owner, now);
  }
  // Granting removed entries from pending_: find the others again.
  std::vector<size_t> rest;
  for (const auto& r : others_requests)
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i].request.app == r.app && pending_[i].request.index == r.index)
        rest.push_back(i);
  decide_among(rest, -1, now);
}

void OptimizingPolicy::decide_among(const std::vector<size_t>& candidates, AppId usable_by,
                                    double now) {
  if (candidates.empty()) return;
  OptimizerInput in;
  in.device = &config_.buffer_device;
  in.buffer_link_bw = config_.buffer_link_bw;
  in.max_colocated = max_colocated_;
  in.min_buffers = config_.min_buffers;
  std::vector<PhaseRequest> chosen;
  for (size_t i : candidates) {
    const auto& p = pending_[i];
    const double client_bw =
        apps_[static_cast<size_t>(p.request.app)].info.nodes * config_.client_node_bw;
    in.candidates.push_back({p.request.bytes, p.request.op, now - p.requested, client_bw,
                             config_.phase_buffer_bound()});
    chosen.push_back(p.request);
  }

  // Buffers that can take a phase, least loaded and emptiest first.
  std::vector<BufferId> ids;
  for (BufferId b = 0; b < config_.buffer_count; ++b) {
    const auto& buf = buffers_[static_cast<size_t>(b)];
    if (buf.phases < max_colocated_ && placeable(b, usable_by)) ids.push_back(b);
  }
  std::sort(ids.begin(), ids.end(), [&](BufferId a, BufferId b) {
    const auto& x = buffers_[static_cast<size_t>(a)];
    const auto& y = buffers_[static_cast<size_t>(b)];
    const int load_x = x.phases + (x.draining ? 1 : 0);
    const int load_y = y.phases + (y.draining ? 1 : 0);
    return std::tie(load_x, x.used, a) < std::tie(load_y, y.used, b);
  });
  for (BufferId b : ids) {
    const auto& buf = buffers_[static_cast<size_t>(b)];
    const bool drain_counts = buf.draining && traits_.drain_mode == DrainMode::Overlap;
    in.buffers.push_back({buf.phases, drain_counts ? 1 : 0, buf.free()});
  }
  if (in.buffers.empty()) return;

  Plan plan = optimize(in, traits_.objective);
  // Never leave every buffer idle with work waiting: if nothing runs and the objective chose to
  // wait, start the first candidate on the widest feasible set so that time moves on.
  if (plan.groups.empty() && running_.empty()) {
    for (int j = static_cast<int>(in.buffers.size()); j >= 1; --j) {
      const Group g{0, 1, 0, j};
      if (feasible(in, g)) {
        plan.groups.push_back(g);
        break;
      }
    }
  }
  for (const auto& g : plan.groups) {
    std::vector<BufferId> bufs(ids.begin() + g.first_buffer,
                               ids.begin() + g.first_buffer + g.buffer_count);
    std::sort(bufs.begin(), bufs.end());
    for (int k = g.first_phase; k < g.first_phase + g.phase_count; ++k) {
      const auto& r = chosen[static_cast<size_t>(k)];
      grant(r.app, r.index, bufs, now);
    }
  }
}

}  // namespace harmonia::core
