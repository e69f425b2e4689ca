// ThemisIO's statistical-token sharing (Karrels, Huang, Kan, Arora, Wang, Katz, Gropp, Zhang,
// "Fine-Grained Policy-Driven I/O Sharing for Burst Buffers", SC'23). Each job holds tokens in
// proportion to its share under the sharing policy: job-fair (every job the same), size-fair (in
// proportion to its node count) or user-fair (every user the same, split among the user's jobs).
// Who is served next is drawn at random with probability proportional to tokens ("statistical
// tokens"), among the jobs that have I/O waiting only, so the share of an idle job goes to the
// others (ThemisIO's opportunity fairness).
//
// ThemisIO time-slices one server's I/O cycles; here the unit of service is a buffer. Every job
// with I/O waiting or in progress is entitled to its token share of the buffers (at least Y);
// jobs are drawn by token, each granted its share among the buffers no phase runs on (isolation:
// phases do not share a buffer), until no buffer is left. Phases are not preempted.
#include <algorithm>
#include <map>
#include <random>

#include "core/policies/policies.hpp"
#include "core/policies/shares.hpp"

namespace harmonia::core {

namespace {

enum class ThemisShare { Job, User, Size };

class ThemisIo : public Scheduler {
 public:
  ThemisIo(SchedulerConfig config, Actions& actions, ThemisShare share)
      : Scheduler(std::move(config), actions), share_(share), rng_(config_.seed) {}

 protected:
  void decide(double now) override {
    if (pending_.empty()) return;
    // Jobs with I/O waiting or in progress hold tokens; the others' tokens are redistributed.
    std::vector<AppId> active;
    for (const auto& r : running_) active.push_back(r.request.app);
    for (const auto& p : pending_) active.push_back(p.request.app);
    std::sort(active.begin(), active.end());
    active.erase(std::unique(active.begin(), active.end()), active.end());
    const auto weights = tokens(active);
    const auto shares = apportion(weights, config_.buffer_count, config_.min_buffers);

    // The oldest pending phase of each job (a job writes one phase at a time).
    std::map<AppId, const PendingPhase*> head;
    for (const auto& p : pending_) {
      auto& h = head[p.request.app];
      if (!h || p.requested < h->requested) h = &p;
    }
    std::vector<bool> taken(buffers_.size(), false);
    std::vector<std::pair<PhaseRequest, std::vector<BufferId>>> chosen;
    while (!head.empty()) {
      // Draw one token among the waiting jobs.
      double total = 0;
      for (const auto& [app, p] : head) total += weight_of(app, active, weights);
      double ticket = std::uniform_real_distribution<double>(0, total)(rng_);
      auto pick = head.begin();
      for (auto it = head.begin(); it != head.end(); ++it) {
        pick = it;
        ticket -= weight_of(it->first, active, weights);
        if (ticket < 0) break;
      }
      const PendingPhase& p = *pick->second;
      head.erase(pick);

      std::vector<bool> ok(buffers_.size());
      for (BufferId b = 0; b < config_.buffer_count; ++b)
        ok[static_cast<size_t>(b)] = !taken[static_cast<size_t>(b)] && placeable(b, p.request.app);
      const auto idle = idle_buffers(buffers_, ok);
      const auto slot = std::lower_bound(active.begin(), active.end(), p.request.app);
      const int k = std::min(shares[static_cast<size_t>(slot - active.begin())],
                             static_cast<int>(idle.size()));
      if (k < config_.min_buffers) continue;  // no buffer left that this job may use
      std::vector<BufferId> bufs(idle.begin(), idle.begin() + k);
      if (!fits_on(buffers_, bufs, p.request.bytes)) {
        capacity_blocked_ = true;
        continue;
      }
      std::sort(bufs.begin(), bufs.end());
      for (BufferId b : bufs) taken[static_cast<size_t>(b)] = true;
      chosen.emplace_back(p.request, std::move(bufs));
    }
    for (const auto& [request, bufs] : chosen) grant(request.app, request.index, bufs, now);
  }

 private:
  /// Tokens of each active job under the sharing policy.
  std::vector<double> tokens(const std::vector<AppId>& active) const {
    std::map<std::string, int> jobs_of_user;
    for (AppId a : active) jobs_of_user[user_of(a)] += 1;
    std::vector<double> weights;
    for (AppId a : active) {
      const auto& info = apps_[static_cast<size_t>(a)].info;
      switch (share_) {
        case ThemisShare::Job:
          weights.push_back(1.0);
          break;
        case ThemisShare::Size:
          weights.push_back(static_cast<double>(std::max(1, info.nodes)));
          break;
        case ThemisShare::User:
          weights.push_back(1.0 / jobs_of_user[user_of(a)]);
          break;
      }
    }
    return weights;
  }

  /// A job without a user is its own user.
  std::string user_of(AppId app) const {
    const auto& info = apps_[static_cast<size_t>(app)].info;
    return info.user.empty() ? "job:" + std::to_string(app) : "user:" + info.user;
  }

  static double weight_of(AppId app, const std::vector<AppId>& active,
                          const std::vector<double>& weights) {
    const auto it = std::lower_bound(active.begin(), active.end(), app);
    return weights[static_cast<size_t>(it - active.begin())];
  }

  ThemisShare share_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Scheduler> make_themisio_job(SchedulerConfig config, Actions& actions) {
  return std::make_unique<ThemisIo>(std::move(config), actions, ThemisShare::Job);
}
std::unique_ptr<Scheduler> make_themisio_user(SchedulerConfig config, Actions& actions) {
  return std::make_unique<ThemisIo>(std::move(config), actions, ThemisShare::User);
}
std::unique_ptr<Scheduler> make_themisio_size(SchedulerConfig config, Actions& actions) {
  return std::make_unique<ThemisIo>(std::move(config), actions, ThemisShare::Size);
}

}  // namespace harmonia::core
