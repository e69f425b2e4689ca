#include "core/optimizer.hpp"

#include <algorithm>
#include <limits>

namespace harmonia::core {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Value of an empty plan, and how two parts of a plan add up.
double identity(Combine c) {
  return c == Combine::Sum ? 0.0 : std::numeric_limits<double>::infinity();
}
double combine(Combine c, double a, double b) { return c == Combine::Sum ? a + b : std::min(a, b); }

/// Bandwidth one phase gets on one buffer shared with `streams` device streams and
/// `phases_on_link` phases arriving through the buffer's network link.
double per_buffer_bw(const DeviceModel& device, Op op, int streams, int phases_on_link,
                     double buffer_link_bw) {
  return std::min(device.stream_bw(streams, op), buffer_link_bw / phases_on_link);
}

Prediction predict_from_min(const Candidate& c, int buffer_count, double min_per_buffer_bw,
                            const DeviceModel& device, double buffer_link_bw) {
  const double bw = std::min(buffer_count * min_per_buffer_bw, c.client_bw);
  const double alone_bw =
      std::min(buffer_count * per_buffer_bw(device, c.op, 1, 1, buffer_link_bw), c.client_bw);
  return {c.bytes / bw, c.bytes / alone_bw};
}

}  // namespace

Prediction predict(const Candidate& c, int group_phases, std::span<const BufferSlot> buffers,
                   const DeviceModel& device, double buffer_link_bw) {
  double min_bw = std::numeric_limits<double>::infinity();
  for (const auto& b : buffers)
    min_bw = std::min(min_bw, per_buffer_bw(device, c.op, b.phases + b.drains + group_phases,
                                            b.phases + group_phases, buffer_link_bw));
  return predict_from_min(c, static_cast<int>(buffers.size()), min_bw, device, buffer_link_bw);
}

Deferral deferral(const OptimizerInput& in, const Candidate& c) {
  const double one_buffer = per_buffer_bw(*in.device, c.op, 1, 1, in.buffer_link_bw);
  const double all_buffers = static_cast<double>(in.buffers.size()) * one_buffer;
  // Its own slice is on as many buffers as it may have.
  const std::size_t widest = c.max_buffers > 0
                                 ? std::min(in.buffers.size(), static_cast<size_t>(c.max_buffers))
                                 : in.buffers.size();
  double backlog = 0;
  for (const auto& other : in.candidates) backlog += other.bytes;
  const double slice = c.bytes / std::min(static_cast<double>(widest) * one_buffer, c.client_bw);
  return {slice, std::max(slice, backlog / all_buffers)};
}

bool feasible(const OptimizerInput& in, const Group& g) {
  if (g.phase_count < 1 || g.buffer_count < std::max(1, in.min_buffers)) return false;
  double bytes = 0;
  for (int p = g.first_phase; p < g.first_phase + g.phase_count; ++p) {
    const Candidate& c = in.candidates[static_cast<size_t>(p)];
    if (c.max_buffers > 0 && g.buffer_count > c.max_buffers) return false;
    bytes += c.bytes;
  }
  const double per_buffer = bytes / g.buffer_count;
  for (int b = g.first_buffer; b < g.first_buffer + g.buffer_count; ++b) {
    const auto& slot = in.buffers[static_cast<size_t>(b)];
    if (slot.phases + g.phase_count > in.max_colocated || per_buffer > slot.free_bytes)
      return false;
  }
  return true;
}

double evaluate(const OptimizerInput& in, const Objective& obj, const std::vector<Group>& groups) {
  const int total_buffers = static_cast<int>(in.buffers.size());
  std::vector<bool> scheduled(in.candidates.size(), false);
  double value = identity(obj.combine);
  for (const auto& g : groups) {
    std::span<const Candidate> phases(in.candidates.data() + g.first_phase,
                                      static_cast<size_t>(g.phase_count));
    std::span<const BufferSlot> bufs(in.buffers.data() + g.first_buffer,
                                     static_cast<size_t>(g.buffer_count));
    std::vector<Prediction> preds;
    for (const auto& c : phases)
      preds.push_back(predict(c, g.phase_count, bufs, *in.device, in.buffer_link_bw));
    value = combine(obj.combine, value, obj.group_value({phases, preds, bufs, total_buffers}));
    for (int p = g.first_phase; p < g.first_phase + g.phase_count; ++p)
      scheduled[static_cast<size_t>(p)] = true;
  }
  for (size_t p = 0; p < in.candidates.size(); ++p)
    if (!scheduled[p]) {
      const auto& c = in.candidates[p];
      value = combine(obj.combine, value, obj.deferred_value(c, deferral(in, c)));
    }
  return value;
}

Plan optimize(const OptimizerInput& in, const Objective& obj) {
  const int n = static_cast<int>(in.candidates.size());
  const int m = static_cast<int>(in.buffers.size());
  const int total_buffers = m;
  const int min_buffers = std::max(1, in.min_buffers);
  // best[p][q]: best value for candidates p.. on buffers q..; choice records how it was reached.
  struct Choice {
    enum Kind { Defer, SkipBuffer, Schedule } kind = Defer;
    int phases = 0;
    int buffers = 0;
  };
  const auto idx = [m](int p, int q) { return static_cast<size_t>(p * (m + 1) + q); };
  std::vector<double> best(static_cast<size_t>((n + 1) * (m + 1)), identity(obj.combine));
  std::vector<Choice> choice(best.size());
  // Phases the best plan from (p, q) schedules. A bottleneck objective is worth only its worst
  // part, so once one candidate must wait, every plan that defers it ties, starting three phases
  // or six; among equal values such an objective prefers the plan that starts the most phases.
  std::vector<int> started(best.size(), 0);
  const auto better = [&](double v, int n_started, double than, int than_started) {
    if (obj.combine == Combine::Min && v == than) return n_started >= than_started;
    return v >= than;
  };

  std::vector<double> deferred(static_cast<size_t>(n));
  for (size_t p = 0; p < deferred.size(); ++p)
    deferred[p] = obj.deferred_value(in.candidates[p], deferral(in, in.candidates[p]));

  std::vector<Prediction> preds;
  for (int p = n - 1; p >= 0; --p) {
    for (int q = m; q >= 0; --q) {
      // Ties go to scheduling (the widest group), then to leaving a buffer idle, then to
      // deferring, so that equal plans start earlier candidates (the policy's order) first.
      double value = combine(obj.combine, deferred[static_cast<size_t>(p)], best[idx(p + 1, q)]);
      int value_started = started[idx(p + 1, q)];
      Choice chosen{Choice::Defer, 0, 0};
      if (q < m && better(best[idx(p, q + 1)], started[idx(p, q + 1)], value, value_started)) {
        value = best[idx(p, q + 1)];
        value_started = started[idx(p, q + 1)];
        chosen = {Choice::SkipBuffer, 0, 0};
      }
      const int max_phases = std::min(in.max_colocated, n - p);
      for (int i = 1; i <= max_phases; ++i) {
        double bytes = 0;
        int widest = m;  // the most buffers every phase of the group may be placed on
        for (int k = p; k < p + i; ++k) {
          const Candidate& c = in.candidates[static_cast<size_t>(k)];
          bytes += c.bytes;
          if (c.max_buffers > 0) widest = std::min(widest, c.max_buffers);
        }
        // Extend the buffer range one buffer at a time, keeping the running minima that decide
        // feasibility and the group's bandwidth.
        double min_free = std::numeric_limits<double>::infinity();
        int max_phases_on_buffer = 0;
        std::vector<double> min_bw(static_cast<size_t>(i), std::numeric_limits<double>::infinity());
        for (int j = 1; q + j <= m && j <= widest; ++j) {
          const auto& slot = in.buffers[static_cast<size_t>(q + j - 1)];
          min_free = std::min(min_free, slot.free_bytes);
          max_phases_on_buffer = std::max(max_phases_on_buffer, slot.phases);
          if (max_phases_on_buffer + i > in.max_colocated) break;  // X only gets worse
          for (int k = 0; k < i; ++k) {
            const auto& c = in.candidates[static_cast<size_t>(p + k)];
            min_bw[static_cast<size_t>(k)] =
                std::min(min_bw[static_cast<size_t>(k)],
                         per_buffer_bw(*in.device, c.op, slot.phases + slot.drains + i,
                                       slot.phases + i, in.buffer_link_bw));
          }
          if (j < min_buffers || bytes / j > min_free) continue;
          preds.clear();
          for (int k = 0; k < i; ++k)
            preds.push_back(predict_from_min(in.candidates[static_cast<size_t>(p + k)], j,
                                             min_bw[static_cast<size_t>(k)], *in.device,
                                             in.buffer_link_bw));
          const double group = obj.group_value(
              {std::span<const Candidate>(in.candidates.data() + p, static_cast<size_t>(i)), preds,
               std::span<const BufferSlot>(in.buffers.data() + q, static_cast<size_t>(j)),
               total_buffers});
          const double total = combine(obj.combine, group, best[idx(p + i, q + j)]);
          if (better(total, i + started[idx(p + i, q + j)], value, value_started)) {
            value = total;
            value_started = i + started[idx(p + i, q + j)];
            chosen = {Choice::Schedule, i, j};
          }
        }
      }
      best[idx(p, q)] = value;
      started[idx(p, q)] = value_started;
      choice[idx(p, q)] = chosen;
    }
  }

  Plan plan{best[idx(0, 0)], {}};
  for (int p = 0, q = 0; p < n;) {
    const auto& c = choice[idx(p, q)];
    switch (c.kind) {
      case Choice::Defer:
        ++p;
        break;
      case Choice::SkipBuffer:
        ++q;
        break;
      case Choice::Schedule:
        plan.groups.push_back({p, c.phases, q, c.buffers});
        p += c.phases;
        q += c.buffers;
        break;
    }
  }
  return plan;
}

Plan exhaustive_search(const OptimizerInput& in, const Objective& obj) {
  // Label every candidate and buffer with a group number, or -1 (deferred / idle), and keep the
  // labelings where each group is a non-empty run of consecutive candidates and of consecutive
  // buffers, groups appearing in the same order in both lists.
  const int n = static_cast<int>(in.candidates.size());
  const int m = static_cast<int>(in.buffers.size());
  const int max_groups = std::min(n, m);
  const int items = n + m;
  std::vector<int> label(static_cast<size_t>(items), -1);
  Plan best{kNegInf, {}};

  const auto runs = [&](int from, int count, int groups, std::vector<std::pair<int, int>>& out) {
    out.assign(static_cast<size_t>(groups), {-1, 0});
    int last = -1;
    for (int k = 0; k < count; ++k) {
      const int g = label[static_cast<size_t>(from + k)];
      if (g < 0) continue;
      auto& [start, len] = out[static_cast<size_t>(g)];
      if (start < 0) {
        if (g != last + 1) return false;  // groups must appear in order 0, 1, 2, ...
        start = k;
        last = g;
      } else if (g != last || start + len != k) {
        return false;  // a group must be one consecutive run
      }
      ++len;
    }
    return last == groups - 1;
  };

  std::vector<std::pair<int, int>> phase_runs, buffer_runs;
  while (true) {
    int groups = 0;
    for (int v : label) groups = std::max(groups, v + 1);
    if (runs(0, n, groups, phase_runs) && runs(n, m, groups, buffer_runs)) {
      std::vector<Group> plan_groups;
      bool ok = true;
      for (int g = 0; g < groups && ok; ++g) {
        Group grp{
            phase_runs[static_cast<size_t>(g)].first, phase_runs[static_cast<size_t>(g)].second,
            buffer_runs[static_cast<size_t>(g)].first, buffer_runs[static_cast<size_t>(g)].second};
        ok = feasible(in, grp);
        plan_groups.push_back(grp);
      }
      if (ok) {
        const double value = evaluate(in, obj, plan_groups);
        if (value > best.value) best = {value, plan_groups};
      }
    }
    int k = 0;  // next labeling, as an odometer over {-1 .. max_groups-1}
    while (k < items && label[static_cast<size_t>(k)] == max_groups - 1)
      label[static_cast<size_t>(k++)] = -1;
    if (k == items) break;
    ++label[static_cast<size_t>(k)];
  }
  return best;
}

}  // namespace harmonia::core
