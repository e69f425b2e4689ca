#include <gtest/gtest.h>

#include <map>

#include "netsim/random.hpp"
#include "netsim/traffic.hpp"

using namespace harmonia::netsim;

TEST(Pairs, ArePerfectMatchings) {
  const auto partner = pair_clients(612, 4);
  for (size_t i = 0; i < partner.size(); ++i) {
    ASSERT_GE(partner[i], 0);
    EXPECT_NE(partner[i], static_cast<long>(i));
    EXPECT_EQ(partner[static_cast<size_t>(partner[i])], static_cast<long>(i));
  }
  EXPECT_EQ(pair_clients(612, 4), partner);
  EXPECT_NE(pair_clients(612, 5), partner);
  EXPECT_THROW(pair_clients(3, 1), std::invalid_argument);
}

TEST(Pacing, IntervalCountsFromCompletionWithFivePercentJitter) {
  const Pacing p{.interval = 1e-3, .window = 0, .jitter = 0.05};
  Rng rng(1);
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double gap = p.next_start(0.0, 2.0, rng) - 2.0;
    lo = std::min(lo, gap);
    hi = std::max(hi, gap);
    sum += gap;
  }
  EXPECT_GE(lo, 0.95e-3);
  EXPECT_LT(hi, 1.05e-3);
  EXPECT_LT(lo, 0.951e-3);
  EXPECT_GT(hi, 1.049e-3);
  EXPECT_NEAR(sum / 10000, 1e-3, 2e-6);
}

TEST(Pacing, CheckpointStartsAtOnceAndBackToBack) {
  const Pacing p{.interval = 0, .window = 0, .jitter = 0.05};
  Rng rng(1);
  EXPECT_EQ(p.first_start(rng), 0.0);
  EXPECT_EQ(p.next_start(1.0, 1.5, rng), 1.5);
}

TEST(Pacing, StartSpreadSpreadsCheckpointStarts) {
  const Pacing p{.interval = 0, .window = 0, .jitter = 0.05, .start_spread = 1e-3};
  Rng rng(3);
  double lo = 1, hi = 0;
  for (int i = 0; i < 1000; ++i) {
    const double first = p.first_start(rng);
    lo = std::min(lo, first);
    hi = std::max(hi, first);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(lo, 0.01e-3);
  EXPECT_LT(hi, 1e-3);
  EXPECT_GT(hi, 0.99e-3);
  EXPECT_EQ(p.next_start(1.0, 1.5, rng), 1.5);  // back to back afterwards
}

TEST(Pacing, ThrottleWindowSpacesStartsUnlessTheRequestIsLonger) {
  // Paper section 5.3: the window is the time between two starts.
  const Pacing p{.interval = 0, .window = 3e-3, .jitter = 0};
  Rng rng(1);
  EXPECT_DOUBLE_EQ(p.next_start(1.0, 1.001, rng), 1.003);  // short request: wait for the window
  EXPECT_DOUBLE_EQ(p.next_start(1.0, 1.005, rng), 1.005);  // long request: go at once
  const double first = p.first_start(rng);
  EXPECT_GE(first, 0.0);
  EXPECT_LT(first, 3e-3);
}

TEST(ServerCycle, StartsAtRandomThenGoesRoundRobin) {
  std::map<long, int> firsts;
  for (uint64_t seed = 0; seed < 720; ++seed) {
    Rng rng(seed);
    ServerCycle cycle(72, ServerOrder::RoundRobin, rng);
    const long first = cycle.next(rng);
    ++firsts[first];
    for (int k = 1; k < 100; ++k) EXPECT_EQ(cycle.next(rng), (first + k) % 72);
  }
  EXPECT_GT(firsts.size(), 60u);  // the first server is spread over the servers
}

TEST(ServerCycle, RandomOrderDrawsEveryRequest) {
  Rng rng(3);
  ServerCycle cycle(8, ServerOrder::Random, rng);
  std::map<long, int> seen;
  for (int k = 0; k < 8000; ++k) ++seen[cycle.next(rng)];
  ASSERT_EQ(seen.size(), 8u);
  for (auto [server, count] : seen) EXPECT_NEAR(count, 1000, 150);
}

TEST(Rng, StreamsAreReproducibleAndIndependent) {
  Rng a = Rng::stream(1, "io-client", 3);
  Rng b = Rng::stream(1, "io-client", 3);
  Rng c = Rng::stream(1, "io-client", 4);
  Rng d = Rng::stream(1, "mpi-client", 3);
  const double x = a.uniform();
  EXPECT_EQ(x, b.uniform());
  EXPECT_NE(x, c.uniform());
  EXPECT_NE(x, d.uniform());
  // mt19937_64's output is fixed by the standard, so this value holds on every platform.
  EXPECT_EQ(Rng(5489).below(1000), 14514284786278117030ULL % 1000);
}

TEST(Rng, BelowIsUniform) {
  Rng rng(9);
  std::map<uint64_t, int> seen;
  for (int i = 0; i < 60000; ++i) ++seen[rng.below(6)];
  for (auto [value, count] : seen) EXPECT_NEAR(count, 10000, 400) << value;
}
