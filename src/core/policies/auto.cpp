// The `auto` policy: automatic policy choice (issue 17 item 4). The paper leaves the choice to
// the administrator (section VII: the policies give "system administrators many tools to achieve
// their respective goals"). At every scheduling window with a phase waiting, auto forecasts each
// candidate policy from the current state with the fluid look-ahead of the policy core
// (core/lookahead.hpp) over the phases running and waiting and each application's next
// iteration, and lets the candidate with the best forecast value of the admin's objective
// (`auto.objective`) make this window's decision. docs/scheduling-model.md, section 10.
#include "core/policies/auto.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "core/policies/policies.hpp"
#include "core/registry.hpp"

namespace harmonia::core {

bool AutoPolicy::choosable(const std::string& policy) {
  return policy != "auto" && policy != "datawarp" && policy != "slurm-easy" &&
         policy != "slurm-easy-sjf" && policy != "plan-based";
}

AutoPolicy::AutoPolicy(SchedulerConfig config, Actions& actions)
    : Scheduler(std::move(config), actions),
      objective_(parse_auto_objective(config_.auto_objective)),
      names_(config_.auto_candidates) {
  if (names_.empty())
    for (const auto& name : policy_names())
      if (choosable(name)) names_.push_back(name);
  for (const auto& name : names_) {
    if (!choosable(name))
      throw std::invalid_argument("auto.candidates: '" + name +
                                  "' cannot be chosen per window (it admits jobs by reservation "
                                  "or is auto itself)");
    delegates_.push_back(make_scheduler(name, config_, capture_));  // unknown names throw
  }
  if (std::set<std::string>(names_.begin(), names_.end()).size() != names_.size())
    throw std::invalid_argument("auto.candidates: a policy is named twice");
}

DrainMode AutoPolicy::drain_mode() const { return Lookahead::drain_mode(*delegates_[current_]); }

std::vector<ExpectedIteration> AutoPolicy::expected_iterations() const {
  // Phase records keep no operation: the next iteration is taken to write, as in every example.
  std::vector<ExpectedIteration> next;
  const auto& records = recorder().phases();
  for (AppId app : running_apps()) {
    double bytes = 0, gaps = 0, last_end = -1;
    int phases = 0, gap_samples = 0, last_index = -1;
    bool busy = false;
    for (size_t at : recorder().phases_of(app)) {
      const auto& p = records[at];
      if (last_end >= 0) {
        gaps += std::max(0.0, p.requested - last_end);
        gap_samples += 1;
      }
      bytes += p.bytes;
      phases += 1;
      last_index = std::max(last_index, p.index);
      last_end = p.end;
      busy = p.end < 0;
    }
    // Without one observed compute gap there is nothing to predict from.
    if (gap_samples == 0) continue;
    // A read it has announced is a phase it will ask for: the next iteration comes after it.
    for (const auto& r : reads())
      if (r.request.app == app) last_index = std::max(last_index, r.request.index);
    next.push_back({app, last_index + 1, bytes / phases, Op::Write, gaps / gap_samples,
                    busy ? -1.0 : last_end});
  }
  return next;
}

void AutoPolicy::decide(double now) {
  if (pending_.empty()) return;
  const auto next = expected_iterations();
  size_t best = 0;
  double best_value = 0;
  for (size_t k = 0; k < names_.size(); ++k) {
    const double value = Lookahead::forecast(names_[k], *this, now, next).value(objective_);
    if (k == 0 || value < best_value) {
      best = k;
      best_value = value;
    }
  }
  current_ = best;
  last_choice_ = names_[best];
  choices_[last_choice_] += 1;

  // The chosen candidate decides on auto's own state, lent to it, and the host hears of its
  // decisions once auto has the state back.
  auto& delegate = *delegates_[best];
  Lookahead::swap_state(*this, delegate);
  Lookahead::decide(delegate, now);
  const bool blocked = Lookahead::capacity_blocked(delegate);
  Lookahead::swap_state(*this, delegate);
  capacity_blocked_ = blocked;
  capture_.replay(actions_);
}

void AutoPolicy::Capture::replay(Actions& host) {
  for (const auto& call : calls) switch (call.kind) {
      case Kind::Admit:
        host.admit(call.app);
        break;
      case Kind::Grant:
        host.grant(call.phase, call.buffers);
        break;
      case Kind::Prefetch:
        host.start_prefetch(call.phase, call.buffers);
        break;
      case Kind::StartDrain:
        host.start_drain(call.buffer);
        break;
      case Kind::StopDrain:
        host.stop_drain(call.buffer);
        break;
    }
  calls.clear();
}

std::unique_ptr<Scheduler> make_auto(SchedulerConfig config, Actions& actions) {
  return std::make_unique<AutoPolicy>(std::move(config), actions);
}

}  // namespace harmonia::core
