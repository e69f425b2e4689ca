#include "netsim/random.hpp"

namespace harmonia::netsim {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Rng Rng::stream(uint64_t seed, std::string_view what, uint64_t index) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of the purpose
  for (char c : what) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return Rng(mix64(mix64(seed) ^ h) ^ mix64(index + 0x632be59bd9b4e019ULL));
}

uint64_t Rng::below(uint64_t n) {
  // Rejection sampling on the top of the range keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = engine_();
  while (x >= limit);
  return x % n;
}

}  // namespace harmonia::netsim
