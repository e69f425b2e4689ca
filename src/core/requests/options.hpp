#pragma once
/// @file Options of the request schedulers: a string map whose keys are prefixed by the
/// algorithm's name (`twins.window_us`, `to-agg.max_bytes`).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/requests/request_scheduler.hpp"

namespace harmonia::core::requests {

using Options = std::map<std::string, std::string>;

/// One option an algorithm reads: its full name, default, and accepted range.
struct OptionSpec {
  std::string name;            ///< `<algorithm>.<key>`
  std::uint64_t fallback = 0;  ///< the default (unused when `required`)
  std::uint64_t min = 0;
  std::uint64_t max = UINT64_MAX;
  bool required = false;
};

/// Reads one algorithm's options. Every getter marks its key as known; `finish` throws
/// std::invalid_argument naming any option with this algorithm's prefix that no getter asked for.
/// Options of other algorithms are the registry's business (see registry.hpp).
class OptionReader {
 public:
  OptionReader(std::string algorithm, const Options& options);
  /// A reader over no options that lists what the algorithm asks for (`asked()`): getters return
  /// the default, or the minimum of a required option.
  static OptionReader describing(std::string algorithm);

  /// `<algorithm>.<key>` as an unsigned integer in [min, max], or `fallback` when absent.
  std::uint64_t get_uint(const std::string& key, std::uint64_t fallback, std::uint64_t min = 0,
                         std::uint64_t max = UINT64_MAX);
  /// Like get_uint, but the option must be given.
  std::uint64_t require_uint(const std::string& key, std::uint64_t min = 0,
                             std::uint64_t max = UINT64_MAX);
  /// `<algorithm>.max_requests` (default 16, AGIOS' MAX_AGGREG_SIZE) and `<algorithm>.max_bytes`
  /// (default 64 MiB).
  AggregationLimits aggregation();
  /// Throws for options of this algorithm that were never read.
  void finish() const;
  /// Every option asked for so far, in the order asked.
  const std::vector<OptionSpec>& asked() const { return asked_; }

 private:
  std::string full(const std::string& key) const { return algorithm_ + "." + key; }
  std::uint64_t parse(const std::string& name, const std::string& value, std::uint64_t min,
                      std::uint64_t max) const;
  void ask(const OptionSpec& spec);

  std::string algorithm_;
  const Options& options_;
  std::set<std::string> known_;
  std::vector<OptionSpec> asked_;
  bool describing_ = false;
};

}  // namespace harmonia::core::requests
