#include "core/metrics.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace harmonia::core {

Recorder::Recorder(int buffer_count, double buffer_capacity)
    : buffer_count_(buffer_count),
      buffer_capacity_(buffer_capacity),
      buffers_(static_cast<size_t>(buffer_count)) {
  for (auto& b : buffers_) b.steps.emplace_back(0.0, false, 0.0);
}

void Recorder::app_arrived(int app, const std::string& name, double now) {
  if (app != static_cast<int>(apps_.size())) throw std::logic_error("apps must register in order");
  apps_.push_back({name, now, -1, -1});
}

void Recorder::app_started(int app, double now) { apps_.at(static_cast<size_t>(app)).start = now; }
void Recorder::app_ended(int app, double now) { apps_.at(static_cast<size_t>(app)).end = now; }

PhaseRecord& Recorder::phase(int app, int index) {
  for (auto it = phases_.rbegin(); it != phases_.rend(); ++it)
    if (it->app == app && it->index == index) return *it;
  throw std::logic_error("unknown phase");
}

void Recorder::phase_requested(int app, int index, double bytes, double now, Op op) {
  phases_.push_back({app, index, bytes, now, -1, -1, 0, {}, op});
}

void Recorder::phase_granted(int app, int index, const std::vector<int>& buffers, double io_alone,
                             double now) {
  auto& p = phase(app, index);
  p.granted = now;
  p.buffers = buffers;
  p.io_alone = io_alone;
}

void Recorder::phase_completed(int app, int index, double now) { phase(app, index).end = now; }

void Recorder::buffer_changed(int buffer, bool busy, double used, double now) {
  auto& b = buffers_.at(static_cast<size_t>(buffer));
  if (b.busy == busy && b.used == used) return;
  b.busy = busy;
  b.used = used;
  if (std::get<0>(b.steps.back()) == now)
    b.steps.back() = {now, busy, used};
  else
    b.steps.emplace_back(now, busy, used);
}

void Recorder::prefetch_started(int app, int index, double bytes, double now) {
  prefetches_.push_back({app, index, bytes, now, -1});
}

void Recorder::prefetch_done(int app, int index, double now) {
  for (auto& p : prefetches_)
    if (p.app == app && p.index == index && p.end < 0) p.end = now;
}

void Recorder::drain_started(int buffer, double now) {
  auto& b = buffers_.at(static_cast<size_t>(buffer));
  b.open_drain = static_cast<int>(drains_.size());
  drains_.push_back({buffer, now, now, 0});
}

void Recorder::drained(int buffer, double bytes, double now) {
  auto& b = buffers_.at(static_cast<size_t>(buffer));
  if (b.open_drain < 0) return;  // a chunk finishing after the drain was stopped
  auto& d = drains_[static_cast<size_t>(b.open_drain)];
  d.bytes += bytes;
  d.end = now;
}

void Recorder::drain_stopped(int buffer, double now) {
  auto& b = buffers_.at(static_cast<size_t>(buffer));
  if (b.open_drain < 0) return;
  drains_[static_cast<size_t>(b.open_drain)].end = now;
  b.open_drain = -1;
}

std::vector<AppMetrics> Recorder::app_metrics() const {
  std::vector<AppMetrics> out;
  for (size_t a = 0; a < apps_.size(); ++a) {
    const auto& rec = apps_[a];
    AppMetrics m;
    m.name = rec.name;
    m.arrival = rec.arrival;
    m.start = rec.start;
    m.end = rec.end;
    m.completion = rec.end - rec.arrival;
    double phase_wait = 0, io_alone = 0, interference = 0;
    for (const auto& p : phases_) {
      if (p.app != static_cast<int>(a) || p.end < 0) continue;
      const double io = p.end - p.granted;
      phase_wait += p.granted - p.requested;
      m.io += io;
      io_alone += p.io_alone;
      interference += std::max(0.0, io - p.io_alone);
      m.bytes += p.bytes;
    }
    m.wait = (rec.start - rec.arrival) + phase_wait;
    m.compute = (rec.end - rec.start) - phase_wait - m.io;
    m.stall = m.wait + interference;
    m.bandwidth = m.io > 0 ? m.bytes / m.io : 0;
    m.interference_factor = io_alone > 0 ? m.io / io_alone : 1;
    out.push_back(m);
  }
  return out;
}

SystemMetrics Recorder::system_metrics() const {
  SystemMetrics s;
  const auto apps = app_metrics();
  if (apps.empty()) return s;
  s.min_completion = apps.front().completion;
  s.max_completion = apps.front().completion;
  for (const auto& a : apps) {
    s.avg_completion += a.completion;
    s.avg_wait += a.wait;
    s.avg_io += a.io;
    s.avg_compute += a.compute;
    s.avg_stall += a.stall;
    s.avg_app_bandwidth += a.bandwidth;
    s.avg_interference_factor += a.interference_factor;
    s.min_completion = std::min(s.min_completion, a.completion);
    s.max_completion = std::max(s.max_completion, a.completion);
    s.makespan = std::max(s.makespan, a.end);
  }
  const double n = static_cast<double>(apps.size());
  s.avg_completion /= n;
  s.avg_wait /= n;
  s.avg_io /= n;
  s.avg_compute /= n;
  s.avg_stall /= n;
  s.avg_app_bandwidth /= n;
  s.avg_interference_factor /= n;
  s.fairness = s.max_completion - s.min_completion;

  int counted = 0;
  for (const auto& p : phases_) {
    if (p.end < 0) continue;
    s.avg_phase_bandwidth += p.bytes / (p.end - p.requested);
    ++counted;
  }
  if (counted > 0) s.avg_phase_bandwidth /= counted;

  // B_U and C_R integrate each buffer's step function over [0, makespan].
  if (s.makespan > 0) {
    double busy = 0, free = 0;
    for (const auto& b : buffers_) {
      for (size_t i = 0; i < b.steps.size(); ++i) {
        const auto [t0, is_busy, used] = b.steps[i];
        const double t1 = i + 1 < b.steps.size() ? std::get<0>(b.steps[i + 1]) : s.makespan;
        const double dt = std::max(0.0, std::min(t1, s.makespan) - std::min(t0, s.makespan));
        if (is_busy) busy += dt;
        free += dt * (1.0 - used / buffer_capacity_);
      }
    }
    s.buffer_utilization = busy / (s.makespan * buffer_count_);
    s.remaining_capacity = free / (s.makespan * buffer_count_);
    s.buffer_efficiency = (s.buffer_utilization + s.remaining_capacity) / 2;
  }
  return s;
}

}  // namespace harmonia::core
