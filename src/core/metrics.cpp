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

std::vector<size_t>& Recorder::slot(std::vector<std::vector<size_t>>& by_app, int app) {
  if (app < 0) throw std::logic_error("negative application id");
  if (by_app.size() <= static_cast<size_t>(app)) by_app.resize(static_cast<size_t>(app) + 1);
  return by_app[static_cast<size_t>(app)];
}

const std::vector<size_t>& Recorder::phases_of(int app) const {
  static const std::vector<size_t> none;
  return app >= 0 && static_cast<size_t>(app) < phases_by_app_.size()
             ? phases_by_app_[static_cast<size_t>(app)]
             : none;
}

PhaseRecord& Recorder::phase(int app, int index) {
  const auto& mine = phases_of(app);
  for (auto it = mine.rbegin(); it != mine.rend(); ++it)
    if (phases_[*it].index == index) return phases_[*it];
  throw std::logic_error("unknown phase");
}

void Recorder::phase_requested(int app, int index, double bytes, double now, Op op) {
  slot(phases_by_app_, app).push_back(phases_.size());
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
  slot(prefetches_by_app_, app).push_back(prefetches_.size());
  prefetches_.push_back({app, index, bytes, now, -1});
}

void Recorder::prefetch_done(int app, int index, double now) {
  for (size_t at : slot(prefetches_by_app_, app)) {
    auto& p = prefetches_[at];
    if (p.index == index && p.end < 0) p.end = now;
  }
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

Recorder Recorder::live_part(const std::vector<int>& apps) const {
  Recorder out(buffer_count_, buffer_capacity_);
  std::vector<size_t> phases, prefetches;
  for (size_t k = 0; k < apps.size(); ++k) {
    out.apps_.push_back(apps_.at(static_cast<size_t>(apps[k])));
    const auto& mine = phases_of(apps[k]);
    phases.insert(phases.end(), mine.begin(), mine.end());
    if (static_cast<size_t>(apps[k]) < prefetches_by_app_.size()) {
      const auto& staged = prefetches_by_app_[static_cast<size_t>(apps[k])];
      prefetches.insert(prefetches.end(), staged.begin(), staged.end());
    }
  }
  const auto renumbered = [&](int app) {
    return static_cast<int>(std::lower_bound(apps.begin(), apps.end(), app) - apps.begin());
  };
  std::sort(phases.begin(), phases.end());
  for (size_t at : phases) {
    PhaseRecord record = phases_[at];
    record.app = renumbered(record.app);
    slot(out.phases_by_app_, record.app).push_back(out.phases_.size());
    out.phases_.push_back(std::move(record));
  }
  std::sort(prefetches.begin(), prefetches.end());
  for (size_t at : prefetches) {
    PrefetchRecord record = prefetches_[at];
    record.app = renumbered(record.app);
    slot(out.prefetches_by_app_, record.app).push_back(out.prefetches_.size());
    out.prefetches_.push_back(record);
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const auto& track = buffers_[b];
    auto& copy = out.buffers_[b];
    copy.busy = track.busy;
    copy.used = track.used;
    copy.steps = {track.steps.back()};
    if (track.open_drain >= 0) {
      copy.open_drain = static_cast<int>(out.drains_.size());
      out.drains_.push_back(drains_[static_cast<size_t>(track.open_drain)]);
    }
  }
  return out;
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
    for (size_t at : phases_of(static_cast<int>(a))) {
      const auto& p = phases_[at];
      if (p.end < 0) continue;
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
