// One decision of the `auto` policy: a window of N phases asked at once by N applications on M
// SSD buffers, every candidate policy forecast to the end of the window (core/lookahead.hpp),
// then the best one deciding. Also one forecast alone, per candidate, to show where time goes.
#include <benchmark/benchmark.h>

#include <random>

#include "core/lookahead.hpp"
#include "core/policies/auto.hpp"
#include "core/registry.hpp"

using namespace harmonia::core;

namespace {

class NoActions : public Actions {
 public:
  void admit(AppId) override {}
  void grant(const PhaseRequest&, const std::vector<BufferId>&) override {}
  void start_prefetch(const PhaseRequest&, const std::vector<BufferId>&) override {}
  void start_drain(BufferId) override {}
  void stop_drain(BufferId) override {}
};

SchedulerConfig ssd(int buffers) {
  SchedulerConfig c(DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557));
  c.buffer_count = buffers;
  c.buffer_capacity = 200e9;
  c.buffer_link_bw = 1.25e9;
  c.client_node_bw = 1.25e9;
  c.max_colocated = 3;
  c.max_running_apps = 0;
  return c;
}

/// `apps` applications, each asking for one phase of 1-32 GB at t = 0.
void window(Scheduler& s, int apps) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> size(1e9, 32e9);
  for (int a = 0; a < apps; ++a) {
    AppInfo info;
    info.name = "app" + std::to_string(a);
    s.on_app_register(info, 0);
  }
  for (int a = 0; a < apps; ++a) s.on_phase_request({a, 0, size(rng), Op::Write, 0}, 0);
}

void auto_decision(benchmark::State& state) {
  const int apps = static_cast<int>(state.range(0));
  const int buffers = static_cast<int>(state.range(1));
  NoActions actions;
  for (auto _ : state) {
    state.PauseTiming();
    AutoPolicy policy(ssd(buffers), actions);
    window(policy, apps);
    state.ResumeTiming();
    policy.on_tick(0);
  }
  state.counters["phases"] = apps;
  state.counters["buffers"] = buffers;
}

void forecast(benchmark::State& state, const std::string& policy) {
  const int apps = static_cast<int>(state.range(0));
  const int buffers = static_cast<int>(state.range(1));
  NoActions actions;
  const auto from = make_scheduler(policy, ssd(buffers), actions);
  window(*from, apps);
  for (auto _ : state) benchmark::DoNotOptimize(Lookahead::forecast(policy, *from, 0, {}));
}

}  // namespace

BENCHMARK(auto_decision)->Args({16, 4})->Args({64, 16})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(forecast, max_bandwidth, "max-bandwidth")
    ->Args({16, 4})
    ->Args({64, 16})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(forecast, min_stall, "min-stall")
    ->Args({16, 4})
    ->Args({64, 16})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(forecast, fair_share, "fair-share")
    ->Args({16, 4})
    ->Args({64, 16})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(forecast, themisio_job, "themisio-job")
    ->Args({16, 4})
    ->Args({64, 16})
    ->Unit(benchmark::kMillisecond);
