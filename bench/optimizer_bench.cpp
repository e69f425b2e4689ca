// One optimizer decision (Eq. 3) for 64 pending phases on 16 buffers, per DP policy objective.
#include <benchmark/benchmark.h>

#include <random>

#include "core/optimizer.hpp"
#include "core/policies/policies.hpp"

using namespace harmonia::core;

namespace {

OptimizerInput decision(int phases, int buffers) {
  static const DeviceModel ssd = DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> size(1e9, 32e9), waited(0, 300), free(50e9, 200e9);
  std::uniform_int_distribution<int> load(0, 1);
  OptimizerInput in;
  in.device = &ssd;
  in.buffer_link_bw = 1.25e9;
  in.max_colocated = 3;
  in.min_buffers = 1;
  for (int i = 0; i < phases; ++i)
    in.candidates.push_back({size(rng), Op::Write, waited(rng), 5e9});
  for (int j = 0; j < buffers; ++j) in.buffers.push_back({load(rng), load(rng), free(rng)});
  return in;
}

template <class MakeObjective>
void bench_decision(benchmark::State& state, MakeObjective make) {
  const auto in = decision(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const Objective objective = make();
  for (auto _ : state) benchmark::DoNotOptimize(optimize(in, objective));
  state.counters["phases"] = static_cast<double>(state.range(0));
  state.counters["buffers"] = static_cast<double>(state.range(1));
}

}  // namespace

BENCHMARK_CAPTURE(bench_decision, max_bandwidth, max_bandwidth_objective)
    ->Args({64, 16})
    ->Args({16, 4})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bench_decision, min_stall, min_stall_objective)
    ->Args({64, 16})
    ->Args({16, 4})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bench_decision, fairness, fairness_objective)
    ->Args({64, 16})
    ->Args({16, 4})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bench_decision, max_buffer_efficiency,
                  [] { return max_buffer_efficiency_objective(16 * 200e9); })
    ->Args({64, 16})
    ->Args({16, 4})
    ->Unit(benchmark::kMicrosecond);
