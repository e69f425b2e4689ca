#pragma once
/// @file Deterministic random numbers: the same seed gives the same draws with any standard
/// library, because only std::mt19937_64 (whose output the standard fixes) is used, and the
/// conversions to doubles, bounded integers and shuffles are written out here.

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace harmonia::netsim {

/// A seeded stream of random numbers.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  /// A stream for one purpose (`what`) and index, independent of every other stream of `seed`:
  /// clients draw from their own streams, so a job's draws do not depend on other jobs.
  static Rng stream(uint64_t seed, std::string_view what, uint64_t index = 0);

  /// Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n), n > 0, without modulo bias.
  uint64_t below(uint64_t n);

  /// Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

/// SplitMix64 finaliser: spreads nearby seeds far apart.
uint64_t mix64(uint64_t x);

}  // namespace harmonia::netsim
