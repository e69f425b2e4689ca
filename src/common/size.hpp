#pragma once
/// @file Sizes as people write them on command lines and in the environment.

#include <cctype>
#include <cstddef>
#include <optional>
#include <string>

namespace harmonia::common {

/// Parses "64M", "1G", "4096", "512KiB" (binary multiples); nullopt when malformed or zero.
inline std::optional<size_t> parse_size(const std::string& text) {
  size_t i = 0;
  unsigned long long value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
    if (value > (1ULL << 50)) return std::nullopt;
    ++i;
  }
  std::string unit = text.substr(i);
  unsigned shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K" || unit == "KiB")
    shift = 10;
  else if (unit == "M" || unit == "MiB")
    shift = 20;
  else if (unit == "G" || unit == "GiB")
    shift = 30;
  else
    return std::nullopt;
  if (value == 0) return std::nullopt;
  return static_cast<size_t>(value << shift);
}

}  // namespace harmonia::common
