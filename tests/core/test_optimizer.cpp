#include <gtest/gtest.h>

#include <random>

#include "core/optimizer.hpp"
#include "core/policies/policies.hpp"

using namespace harmonia::core;

namespace {

const DeviceModel& ssd() {
  static const DeviceModel dev = DeviceModel::from_slope("ssd", 500e6, 550e6, 2, 0.9557);
  return dev;
}

std::vector<std::pair<std::string, Objective>> objectives() {
  return {{"max-bandwidth", max_bandwidth_objective()},
          {"min-stall", min_stall_objective()},
          {"fairness", fairness_objective()},
          {"max-buffer-efficiency", max_buffer_efficiency_objective(4e11)}};
}

OptimizerInput random_instance(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> phases(1, 5), buffers(1, 4), x(1, 3), y(1, 2), load(0, 2),
      widest(0, 4);
  std::uniform_real_distribution<double> size(1e9, 20e9), waited(0, 50), free(5e9, 60e9);
  OptimizerInput in;
  in.device = &ssd();
  in.buffer_link_bw = 1.25e9;
  in.max_colocated = x(rng);
  const int m = buffers(rng);
  in.min_buffers = std::min(y(rng), m);
  for (int i = phases(rng); i > 0; --i)
    in.candidates.push_back({size(rng), Op::Write, waited(rng), 5e9, widest(rng)});
  for (int j = 0; j < m; ++j)
    in.buffers.push_back({std::min(load(rng), in.max_colocated), load(rng) % 2, free(rng)});
  return in;
}

}  // namespace

TEST(Optimizer, DynamicProgramMatchesExhaustiveSearch) {
  std::mt19937_64 rng(2018);
  for (const auto& [name, objective] : objectives()) {
    for (int trial = 0; trial < 150; ++trial) {
      const auto in = random_instance(rng);
      const Plan dp = optimize(in, objective);
      const Plan brute = exhaustive_search(in, objective);
      ASSERT_NEAR(dp.value, brute.value, 1e-9 * std::max(1.0, std::abs(brute.value)))
          << name << " trial " << trial;
      // The plan the DP returns is feasible and really has the value it claims.
      for (const auto& g : dp.groups) ASSERT_TRUE(feasible(in, g)) << name;
      ASSERT_NEAR(evaluate(in, objective, dp.groups), dp.value,
                  1e-9 * std::max(1.0, std::abs(dp.value)))
          << name;
    }
  }
}

TEST(Optimizer, BandwidthObjectiveGivesOnePhaseAllBuffers) {
  // Two equal phases, four idle buffers, exclusive (X = 1): one phase at full width and the other
  // deferred, expected done after (1 + 2) / 2 slices (value 1 + 2/3 per slice), beats two phases
  // on two buffers each (value 1/2 + 1/2).
  OptimizerInput in;
  in.device = &ssd();
  in.buffer_link_bw = 1.25e9;
  in.max_colocated = 1;
  in.candidates = {{16e9, Op::Write, 0, 5e9}, {16e9, Op::Write, 0, 5e9}};
  in.buffers.assign(4, {0, 0, 200e9});
  const Plan plan = optimize(in, objectives()[0].second);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0], (Group{0, 1, 0, 4}));
}

TEST(Optimizer, RespectsCapacityAndColocationLimits) {
  OptimizerInput in;
  in.device = &ssd();
  in.buffer_link_bw = 1.25e9;
  in.max_colocated = 2;
  in.candidates = {{10e9, Op::Write, 0, 5e9}};
  in.buffers = {{2, 0, 100e9}, {0, 0, 4e9}, {0, 0, 6e9}, {1, 0, 6e9}};
  EXPECT_FALSE(feasible(in, {0, 1, 0, 1}));  // buffer 0 already holds X phases
  EXPECT_FALSE(feasible(in, {0, 1, 1, 1}));  // 10 GB does not fit in 4 GB
  EXPECT_FALSE(feasible(in, {0, 1, 1, 2}));  // 5 GB per buffer does not fit in 4 GB
  EXPECT_TRUE(feasible(in, {0, 1, 2, 2}));   // 5 GB per buffer fits in 6 GB, 1 + 1 <= X
  in.min_buffers = 3;
  EXPECT_FALSE(feasible(in, {0, 1, 2, 2}));  // Y: at least three buffers per phase
  in.min_buffers = 1;
  in.candidates[0].max_buffers = 1;
  EXPECT_FALSE(feasible(in, {0, 1, 2, 2}));  // the phase may be placed on one buffer only
}

TEST(Optimizer, APhaseIsPlacedOnNoMoreBuffersThanItMay) {
  // Three equal phases, four idle buffers, exclusive (X = 1), each phase on two buffers at
  // most: the first two run at once, on two buffers each, and the third waits.
  OptimizerInput in;
  in.device = &ssd();
  in.buffer_link_bw = 1.25e9;
  in.max_colocated = 1;
  in.candidates.assign(3, {16e9, Op::Write, 0, 5e9, 2});
  in.buffers.assign(4, {0, 0, 200e9});
  const Plan plan = optimize(in, objectives()[0].second);
  EXPECT_EQ(plan.groups, (std::vector<Group>{{0, 1, 0, 2}, {1, 1, 2, 2}}));
  EXPECT_EQ(exhaustive_search(in, objectives()[0].second).groups, plan.groups);
}

TEST(Optimizer, PredictionUsesSlowestBufferAndClientCap) {
  const Candidate c{10e9, Op::Write, 0, 1e12};
  const std::vector<BufferSlot> bufs = {{0, 0, 1e12}, {1, 1, 1e12}};
  const auto p = predict(c, 1, bufs, ssd(), 1e12);
  // Slowest buffer runs 3 streams: 10 GB / (2 * stream_bw(3)).
  EXPECT_NEAR(p.io, 10e9 / (2 * ssd().stream_bw(3, Op::Write)), 1e-6);
  EXPECT_NEAR(p.io_alone, 10e9 / (2 * ssd().aggregate_bw(1, Op::Write)), 1e-6);
  const Candidate capped{10e9, Op::Write, 0, 1e8};
  EXPECT_NEAR(predict(capped, 1, bufs, ssd(), 1e12).io, 100.0, 1e-9);
}
