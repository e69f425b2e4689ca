#pragma once
/// @file Simulating ahead with the policy core: what a policy would do from a scheduler's current
/// state, in a fluid model of the phases (no SimGrid). The `auto` policy (policies/auto.cpp)
/// forecasts each candidate policy with it and follows the best. docs/scheduling-model.md,
/// section 10.

#include <string>
#include <vector>

#include "core/scheduler.hpp"

namespace harmonia::core {

/// What `auto` minimises over the phases of a forecast.
enum class AutoObjective {
  Makespan,        ///< when the last forecast phase ends
  MeanCompletion,  ///< mean over applications of when their last forecast phase ends
  Stall,           ///< Eq. 7 per application: waits plus interference (end - request - io_alone)
  Slowdown,        ///< mean over phases of (end - request) / io_alone
};

/// The objective named `name` (makespan, mean_completion, stall, slowdown); throws
/// std::invalid_argument naming `auto.objective` otherwise.
AutoObjective parse_auto_objective(const std::string& name);
std::vector<std::string> auto_objective_names();

/// An application's next iteration as its history predicts it: after `gap` seconds of
/// computing it asks for `bytes`. Several for one application follow each other in order.
struct ExpectedIteration {
  AppId app = 0;
  int index = 0;  ///< the index the phase will have
  double bytes = 0;
  Op op = Op::Write;
  double gap = 0;
  /// When the application went back to computing; negative while it has a phase pending or
  /// running (its next iteration then starts when that phase ends in the forecast). Only the
  /// first of an application's iterations reads it; each later one starts when the one before
  /// it ends.
  double idle_since = -1;
};

/// One phase the forecast followed, times in seconds.
struct ForecastPhase {
  AppId app = 0;
  int index = 0;
  double requested = 0;
  double granted = 0;
  double end = 0;
  double io_alone = 0;
};

/// Outcome of one policy over the forecast's phases: those running or pending now, and each
/// application's expected next iteration. Times are from the start of the forecast.
struct Forecast {
  double makespan = 0;
  double mean_completion = 0;
  double stall = 0;
  double slowdown = 0;
  int phases = 0;         ///< phases the forecast followed to their end
  int events = 0;         ///< events it simulated, each a decision of the policy
  bool complete = false;  ///< every phase ended (else the policy left work it never started)
  std::vector<ForecastPhase> followed;  ///< in the order they were requested

  /// The objective's value, lower is better; infinite for an incomplete forecast.
  double value(AutoObjective objective) const;
};

/// Reaches into schedulers on behalf of `auto` (a friend of `Scheduler`).
class Lookahead {
 public:
  /// Exchanges the policy-independent state of `a` and `b`: buffers, applications, pending and
  /// running phases, the admission queue and the record of past phases. What a policy keeps of
  /// its own (random keys, estimates) stays where it is. Constant time: `auto` lends its state to
  /// the candidate that decides, and takes it back with the decision made.
  static void swap_state(Scheduler& a, Scheduler& b);
  /// Runs `s`'s decision at `now` without the drain update of `on_tick`.
  static void decide(Scheduler& s, double now);
  static bool capacity_blocked(const Scheduler& s) { return s.capacity_blocked_; }
  /// Gives `to` the state of `from` restricted to the applications a look-ahead can touch
  /// (running, holding data, with a phase or an expected iteration; not those waiting for
  /// admission), renumbered from 0 in increasing id order; returns their ids in `from`, the
  /// position being the new id.
  static std::vector<AppId> copy_live_state(const Scheduler& from, Scheduler& to,
                                            const std::vector<ExpectedIteration>& next);
  static DrainMode drain_mode(const Scheduler& s) { return s.drain_mode(); }

  /// Runs a fresh `policy` from `from`'s state at `now` to the end of the forecast's phases in a
  /// fluid model: every phase and drain progresses at the rate the device curve and links give
  /// it (section 10 of docs/scheduling-model.md), the policy deciding at every event. Stops after
  /// `max_events` events (the forecast is then incomplete).
  static Forecast forecast(const std::string& policy, const Scheduler& from, double now,
                           const std::vector<ExpectedIteration>& next, int max_events = 20000);
};

}  // namespace harmonia::core
