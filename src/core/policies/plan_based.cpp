// Plan-based scheduling with burst-buffer reservations (J. Kopanski, K. Rzadca, "Plan-based Job
// Scheduling for Supercomputers with Shared Burst Buffers", Euro-Par 2021; the algorithm as the
// paper and Kopanski's thesis state it, checked against their scheduler's code,
// jankopanski/Burst-Buffer-Scheduling `plan_schedule`; nothing copied).
//
// Whenever a job arrives or frees resources, every waiting job is given a place in an execution
// plan: taken in some order, each is reserved the earliest time from which its nodes and its
// burst-buffer capacity are free for its whole time limit, around the running jobs (expected to
// end at their limits) and the jobs planned before it. The order is optimised for the plan's
// sum of waiting times raised to `plan_based.alpha` (2: the paper's best, plan-square): all
// orders of up to 5 jobs are tried; a longer queue starts from the best of nine sorted orders
// (submission; nodes, capacity per node, capacity per node over nodes, time limit, each
// ascending and descending) and is improved by simulated annealing (30 temperatures, cooled by
// 0.9 from the spread between the best and worst sorted orders, 6 random swaps at each). The
// jobs the best plan starts now start now; the others are planned again at the next event. With
// `plan_based.reservation_depth` D > 0, the first D jobs in line are started if they fit, else
// reserved first, as in EASY (the paper's best has D = 0).
//
// A job holds its capacity from its start until its stage-out ends, its nodes until it ends; in
// a job, I/O is as under DataWarp (every phase at once on every buffer). Departures from the
// paper: capacity is one pool (the paper places each node's request on one burst-buffer node),
// jobs are not killed at their limit, and the annealing has a fixed number of steps instead of
// a 20-second limit (the same 180 steps when it is not cut short).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "core/policies/batch_reservations.hpp"
#include "core/policies/policies.hpp"

namespace harmonia::core {

namespace {

constexpr int kExhaustiveUpTo = 5;
constexpr int kCoolingSteps = 30;
constexpr int kStepsPerTemperature = 6;
constexpr double kCoolingRate = 0.9;

/// Free nodes and capacity over time: a step function, each step free from its time on.
class Profile {
 public:
  Profile(double now, long long nodes, double bytes) : steps_{{now, nodes, bytes}} {}

  /// Adds what a running job gives back at `at`.
  void release(double at, long long nodes, double bytes) {
    auto it = split(at);
    for (; it != steps_.end(); ++it) {
      it->nodes += nodes;
      it->bytes += bytes;
    }
  }

  /// The earliest step from which `nodes` and `bytes` are free for `duration`; infinite if none.
  double earliest_start(long long nodes, double bytes, double duration) const {
    size_t i = 0;
    while (i < steps_.size()) {
      const double end = steps_[i].at + duration;
      size_t j = i;
      while (j < steps_.size() && steps_[j].at < end && fits(steps_[j], nodes, bytes)) ++j;
      if (j == steps_.size() || !(steps_[j].at < end)) return steps_[i].at;
      i = j + 1;  // every start up to step j needs step j, which is short
    }
    return kNoLimit;
  }

  void reserve(double start, double duration, long long nodes, double bytes) {
    if (!std::isfinite(start)) return;
    const double end = start + duration;
    if (std::isfinite(end)) split(end);
    for (auto it = split(start); it != steps_.end() && it->at < end; ++it) {
      it->nodes -= nodes;
      it->bytes -= bytes;
    }
  }

 private:
  struct Step {
    double at;
    long long nodes;
    double bytes;
  };

  static bool fits(const Step& s, long long nodes, double bytes) {
    return s.nodes >= nodes && s.bytes >= bytes - kByteEpsilon;
  }

  /// The step starting at `at`, made by copying the one before it when there is none.
  std::vector<Step>::iterator split(double at) {
    auto it = std::lower_bound(steps_.begin(), steps_.end(), at,
                               [](const Step& s, double t) { return s.at < t; });
    if (it != steps_.end() && it->at == at) return it;
    const Step before = *std::prev(it);
    return steps_.insert(it, {at, before.nodes, before.bytes});
  }

  std::vector<Step> steps_;
};

class PlanBased : public BatchReservationPolicy {
 public:
  PlanBased(SchedulerConfig config, Actions& actions)
      : BatchReservationPolicy(std::move(config), actions), rng_(config_.seed) {}

 private:
  struct Planned {
    AppId app;
    double start;
  };
  struct Plan {
    std::vector<Planned> jobs;
    double score = 0;
  };

  int nodes_of(AppId app) const { return std::max(1, apps_[static_cast<size_t>(app)].info.nodes); }

  /// Free resources from now on, with the running jobs expected to end at their limits. A job
  /// past its limit (its I/O ran slower than it planned for) is expected to end at any moment,
  /// but not now: nothing may start on what it holds.
  Profile current(double now) const {
    Profile profile(now, free_nodes(), holdings_.free());
    const double soonest = std::nextafter(now, kNoLimit);
    for (const auto& r : releases(now)) profile.release(std::max(soonest, r.at), r.nodes, r.bytes);
    return profile;
  }

  /// Places the jobs in `order` one after the other on `base`, each at its earliest start.
  Plan plan(Profile base, const std::vector<AppId>& order) const {
    Plan out;
    for (AppId app : order) {
      const double start =
          base.earliest_start(nodes_needed(app), request_of(app), walltime_of(app));
      base.reserve(start, walltime_of(app), nodes_needed(app), request_of(app));
      out.jobs.push_back({app, start});
      out.score += std::pow(start - apps_[static_cast<size_t>(app)].arrival, config_.plan_alpha);
    }
    // Scores are compared as whole numbers, as the paper's implementation does.
    out.score = std::round(out.score);
    return out;
  }

  /// The nine sorted orders the search starts from, each sorted from submission order.
  std::vector<std::vector<AppId>> sorted_orders(const std::vector<AppId>& jobs) const {
    const auto per_node = [&](AppId a) { return request_of(a) / nodes_of(a); };
    const std::vector<std::function<double(AppId)>> keys = {
        [&](AppId a) { return static_cast<double>(nodes_of(a)); }, per_node,
        [&](AppId a) { return per_node(a) / nodes_of(a); },
        [&](AppId a) { return walltime_of(a); }};
    std::vector<std::vector<AppId>> orders = {jobs};
    for (const auto& key : keys)
      for (const bool ascending : {true, false}) {
        auto order = jobs;
        std::stable_sort(order.begin(), order.end(), [&](AppId a, AppId b) {
          return ascending ? key(a) < key(b) : key(a) > key(b);
        });
        orders.push_back(std::move(order));
      }
    return orders;
  }

  /// The best plan of `jobs` found on `base`.
  Plan best_plan(const Profile& base, std::vector<AppId> jobs) {
    Plan best, worst;
    bool first = true;
    const auto consider = [&](const std::vector<AppId>& order) {
      Plan p = plan(base, order);
      if (first || p.score > worst.score) worst = p;
      if (first || p.score < best.score) best = std::move(p);
      first = false;
    };
    if (jobs.size() <= static_cast<size_t>(kExhaustiveUpTo)) {
      std::sort(jobs.begin(), jobs.end());
      do consider(jobs);
      while (std::next_permutation(jobs.begin(), jobs.end()));
      return best;
    }
    for (const auto& order : sorted_orders(jobs)) consider(order);
    if (best.score == worst.score) return best;
    // Simulated annealing from the best sorted order, its temperature starting at the spread of
    // the sorted orders' scores.
    std::vector<AppId> order;
    for (const auto& p : best.jobs) order.push_back(p.app);
    double temperature = worst.score - best.score;
    double current = best.score;
    std::uniform_int_distribution<size_t> position(0, order.size() - 1);
    std::uniform_real_distribution<double> chance(0, 1);
    for (int step = 0; step < kCoolingSteps; ++step) {
      for (int k = 0; k < kStepsPerTemperature; ++k) {
        const size_t i = position(rng_), j = position(rng_);
        std::swap(order[i], order[j]);
        Plan p = plan(base, order);
        if (p.score < best.score) {
          current = p.score;
          best = std::move(p);
        } else if (p.score < current ||
                   chance(rng_) < std::exp((current - p.score) / temperature)) {
          current = p.score;
        } else {
          std::swap(order[i], order[j]);
        }
      }
      temperature = std::max(kCoolingRate * temperature, 1.0);
    }
    return best;
  }

  bool fits_now(const Profile& profile, AppId app, double now) const {
    return profile.earliest_start(nodes_needed(app), request_of(app), walltime_of(app)) == now;
  }

  void schedule(double now) override {
    if (queue_.empty()) return;
    Profile profile = current(now);
    // The first D in line start if they fit, else are reserved their earliest start.
    const size_t depth =
        std::min(queue_.size(), static_cast<size_t>(config_.plan_reservation_depth));
    std::vector<AppId> first(queue_.begin(), queue_.begin() + static_cast<long>(depth));
    std::vector<AppId> rest(queue_.begin() + static_cast<long>(depth), queue_.end());
    for (AppId app : first) {
      if (nodes_needed(app) <= free_nodes() && request_of(app) <= holdings_.free()) {
        start(app, now);
        profile = current(now);
      }
    }
    for (AppId app : first)
      if (std::find(queue_.begin(), queue_.end(), app) != queue_.end())
        profile.reserve(
            profile.earliest_start(nodes_needed(app), request_of(app), walltime_of(app)),
            walltime_of(app), nodes_needed(app), request_of(app));
    // Nothing to decide unless some job could start now.
    if (std::none_of(rest.begin(), rest.end(),
                     [&](AppId app) { return fits_now(profile, app, now); }))
      return;
    for (const auto& p : best_plan(profile, rest).jobs)
      if (p.start == now) start(p.app, now);
  }

  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Scheduler> make_plan_based(SchedulerConfig config, Actions& actions) {
  return std::make_unique<PlanBased>(std::move(config), actions);
}

}  // namespace harmonia::core
