#include "core/requests/options.hpp"

#include <charconv>
#include <stdexcept>
#include <utility>

namespace harmonia::core::requests {

OptionReader::OptionReader(std::string algorithm, const Options& options)
    : algorithm_(std::move(algorithm)), options_(options) {}

OptionReader OptionReader::describing(std::string algorithm) {
  static const Options none;
  OptionReader reader(std::move(algorithm), none);
  reader.describing_ = true;
  return reader;
}

void OptionReader::ask(const OptionSpec& spec) {
  if (known_.insert(spec.name).second) asked_.push_back(spec);
}

std::uint64_t OptionReader::parse(const std::string& name, const std::string& value,
                                  std::uint64_t min, std::uint64_t max) const {
  std::uint64_t v = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  const std::string range = max == UINT64_MAX
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value.empty() || ec != std::errc() || ptr != end || v < min || v > max)
    throw std::invalid_argument(name + ": expected an integer " + range + ", got '" + value + "'");
  return v;
}

std::uint64_t OptionReader::get_uint(const std::string& key, std::uint64_t fallback,
                                     std::uint64_t min, std::uint64_t max) {
  const std::string name = full(key);
  ask({name, fallback, min, max, false});
  const auto it = options_.find(name);
  return it == options_.end() ? fallback : parse(name, it->second, min, max);
}

std::uint64_t OptionReader::require_uint(const std::string& key, std::uint64_t min,
                                         std::uint64_t max) {
  const std::string name = full(key);
  ask({name, 0, min, max, true});
  const auto it = options_.find(name);
  if (it == options_.end() && describing_) return min;
  if (it == options_.end()) throw std::invalid_argument(name + ": required option missing");
  return parse(name, it->second, min, max);
}

AggregationLimits OptionReader::aggregation() {
  AggregationLimits limits;
  limits.max_requests = static_cast<std::size_t>(get_uint("max_requests", 16, 1, 1u << 20));
  limits.max_bytes = get_uint("max_bytes", std::uint64_t{64} << 20, 1);
  return limits;
}

void OptionReader::finish() const {
  const std::string prefix = algorithm_ + ".";
  for (const auto& [name, value] : options_) {
    if (name.compare(0, prefix.size(), prefix) != 0 || known_.count(name)) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument(name + ": unknown option of request scheduler '" + algorithm_ +
                                "' (known: " + (list.empty() ? "none" : list) + ")");
  }
}

}  // namespace harmonia::core::requests
