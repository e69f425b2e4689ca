#pragma once
/// @file The dynamic-programming optimizer of the Harmonia paper's Eq. 3, and an exhaustive search
/// over the same decision space used to check it. See docs/scheduling-model.md.

#include <functional>
#include <span>
#include <vector>

#include "core/device.hpp"

namespace harmonia::core {

/// A pending I/O phase as the optimizer sees it.
struct Candidate {
  double bytes = 0;
  Op op = Op::Write;
  double waited = 0;     ///< seconds already waited since the request
  double client_bw = 0;  ///< the application's network cap (nodes x link bandwidth)
  int max_buffers = 0;   ///< the most buffers it may be placed on; 0: any number
};

/// A buffer node as the optimizer sees it.
struct BufferSlot {
  int phases = 0;         ///< I/O phases currently running on it
  int drains = 0;         ///< drain streams currently running on it (0 or 1)
  double free_bytes = 0;  ///< capacity not yet used or promised
};

/// Predicted outcome for one candidate if scheduled now.
struct Prediction {
  double io = 0;        ///< predicted I/O time with the interference of its group
  double io_alone = 0;  ///< I/O time on the same buffers with nothing else on them
};

/// One scheduled group: `phase_count` consecutive candidates striped over `buffer_count`
/// consecutive buffers.
struct Group {
  int first_phase = 0;
  int phase_count = 0;
  int first_buffer = 0;
  int buffer_count = 0;
  bool operator==(const Group&) const = default;
};

/// What a policy's objective sees of a group.
struct GroupView {
  std::span<const Candidate> phases;
  std::span<const Prediction> predictions;
  std::span<const BufferSlot> buffers;
  int total_buffers = 0;
};

/// What is predicted for a candidate left for a later decision.
struct Deferral {
  /// The paper's time slice: the phase's I/O time on all buffers with no interference.
  double slice = 0;
  /// Time from now until the whole pending backlog (this phase included) is written through
  /// all buffers at full speed, and at least one slice: when the last phase in line is done.
  double backlog = 0;

  /// Expected time until a deferred phase is done when its place in line is unknown: halfway
  /// between first in line (one slice) and last (the whole backlog).
  double mean_until_done() const { return (slice + backlog) / 2; }
};

/// How the values of groups and deferred candidates make the value of a plan.
enum class Combine {
  Sum,  ///< additive objectives (Eq. 4, 5, 7)
  Min,  ///< bottleneck objectives: the plan is worth its worst part (fairness)
};

/// A policy's cost function, to maximise.
struct Objective {
  std::function<double(const GroupView&)> group_value;
  std::function<double(const Candidate&, const Deferral&)> deferred_value;
  Combine combine = Combine::Sum;
};

struct OptimizerInput {
  std::vector<Candidate> candidates;  ///< in the policy's preference order
  std::vector<BufferSlot> buffers;    ///< in preference order
  const DeviceModel* device = nullptr;
  double buffer_link_bw = 0;  ///< network bandwidth into one buffer node
  int max_colocated = 1;      ///< X: I/O phases per buffer, running ones included
  int min_buffers = 1;        ///< Y: buffers per phase
};

struct Plan {
  double value = 0;
  std::vector<Group> groups;
};

/// Predicted I/O time of one candidate in a group of `group_phases` phases on `buffers`.
Prediction predict(const Candidate& c, int group_phases, std::span<const BufferSlot> buffers,
                   const DeviceModel& device, double buffer_link_bw);
/// The prediction for deferring candidate `c` of `in`.
Deferral deferral(const OptimizerInput& in, const Candidate& c);
/// Whether a group satisfies X, Y, capacity and each candidate's max_buffers.
bool feasible(const OptimizerInput& in, const Group& g);
/// Value of a complete plan (groups plus every candidate not in a group deferred).
double evaluate(const OptimizerInput& in, const Objective& obj, const std::vector<Group>& groups);

/// Eq. 3 by dynamic programming with memoisation over (next candidate, next buffer).
Plan optimize(const OptimizerInput& in, const Objective& obj);
/// Every plan of the same decision space, enumerated explicitly; exponential, for tests only.
Plan exhaustive_search(const OptimizerInput& in, const Objective& obj);

}  // namespace harmonia::core
