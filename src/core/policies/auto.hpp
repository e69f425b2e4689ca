#pragma once
/// @file The `auto` policy (automatic policy choice, issue 17): at each scheduling window it
/// forecasts every candidate policy from the current state by simulating ahead with the
/// policy core (core/lookahead.hpp) and lets the best for the admin's objective decide.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/lookahead.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core {

class AutoPolicy : public Scheduler {
 public:
  /// Throws std::invalid_argument naming `auto.objective` or `auto.candidates` when they are
  /// unknown or name a policy that cannot be chosen per window.
  AutoPolicy(SchedulerConfig config, Actions& actions);

  /// The policies it chooses among, in order (ties go to the earlier one).
  const std::vector<std::string>& candidates() const { return names_; }
  /// The policy that made the last decision ("" before the first).
  const std::string& last_choice() const { return last_choice_; }
  /// How many decisions each candidate made.
  const std::map<std::string, int>& choices() const { return choices_; }

  /// Policies that admit jobs by reservation (a decision per job, not per window) or would
  /// recurse: never candidates.
  static bool choosable(const std::string& policy);

 protected:
  void decide(double now) override;
  DrainMode drain_mode() const override;

 private:
  /// Each admitted application's next iteration, from the phases it has done so far.
  std::vector<ExpectedIteration> expected_iterations() const;

  /// Records what the candidate that decides asks of the host, in order, to be passed on once
  /// auto has its state back.
  class Capture : public Actions {
   public:
    enum class Kind { Admit, Grant, Prefetch, StartDrain, StopDrain };
    struct Call {
      Kind kind;
      PhaseRequest phase{};
      std::vector<BufferId> buffers{};
      AppId app = 0;
      BufferId buffer = 0;
    };
    std::vector<Call> calls;
    void admit(AppId app) override { calls.push_back({Kind::Admit, {}, {}, app}); }
    void grant(const PhaseRequest& phase, const std::vector<BufferId>& buffers) override {
      calls.push_back({Kind::Grant, phase, buffers});
    }
    void start_prefetch(const PhaseRequest& phase, const std::vector<BufferId>& buffers) override {
      calls.push_back({Kind::Prefetch, phase, buffers});
    }
    void start_drain(BufferId buffer) override {
      calls.push_back({Kind::StartDrain, {}, {}, 0, buffer});
    }
    void stop_drain(BufferId buffer) override {
      calls.push_back({Kind::StopDrain, {}, {}, 0, buffer});
    }
    /// Makes the recorded calls on `host`, in order, and forgets them.
    void replay(Actions& host);
  };

  AutoObjective objective_;
  std::vector<std::string> names_;
  Capture capture_;
  /// One long-lived instance per candidate, so that what a policy keeps of its own (random
  /// order keys, IO-Sets' estimates) persists across the windows it decides.
  std::vector<std::unique_ptr<Scheduler>> delegates_;
  size_t current_ = 0;
  std::string last_choice_;
  std::map<std::string, int> choices_;
};

}  // namespace harmonia::core
