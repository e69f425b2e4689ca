#include "core/policies/shares.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace harmonia::core {

std::vector<int> apportion(const std::vector<double>& weights, int total, int minimum) {
  const int n = static_cast<int>(weights.size());
  // Everyone gets the minimum first, when there is room for it; the rest goes by weight.
  const int base = n * minimum <= total ? minimum : 0;
  std::vector<int> shares(weights.size(), base);
  const int rest = total - n * base;
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (n > 0 && sum > 0 && rest > 0) {
    std::vector<std::pair<double, size_t>> remainders;
    int given = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const double exact = rest * weights[i] / sum;
      const int whole = static_cast<int>(std::floor(exact));
      shares[i] += whole;
      given += whole;
      remainders.emplace_back(exact - whole, i);
    }
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; given < rest && k < remainders.size(); ++k, ++given)
      shares[remainders[k].second] += 1;
  }
  for (int& s : shares) s = std::max(s, minimum);
  return shares;
}

std::vector<BufferId> idle_buffers(const std::vector<BufferState>& buffers,
                                   const std::vector<bool>& placeable) {
  std::vector<BufferId> idle;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].phases == 0 && placeable[b]) idle.push_back(static_cast<BufferId>(b));
  std::stable_sort(idle.begin(), idle.end(), [&](BufferId a, BufferId b) {
    return buffers[static_cast<size_t>(a)].used < buffers[static_cast<size_t>(b)].used;
  });
  return idle;
}

bool fits_on(const std::vector<BufferState>& buffers, const std::vector<BufferId>& chosen,
             double bytes) {
  if (chosen.empty()) return false;
  const double share = bytes / static_cast<double>(chosen.size());
  return std::all_of(chosen.begin(), chosen.end(),
                     [&](BufferId b) { return buffers[static_cast<size_t>(b)].free() >= share; });
}

}  // namespace harmonia::core
