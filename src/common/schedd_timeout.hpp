#pragma once
/// @file HARMONIA_SCHEDD_TIMEOUT, read the same way by the staging library (its ranks) and by
/// harmonia-agentd (which speaks for them): how long harmonia-schedd may leave a request
/// unanswered before it is given up.

#include <cstdlib>
#include <optional>

namespace harmonia::common {

/// What a bad value is told it should be.
inline constexpr const char* kScheddTimeoutExpected = "expected seconds > 0, at most 3600, e.g. 1";

/// Seconds > 0, at most an hour, all of `text`; nullopt otherwise.
inline std::optional<double> parse_schedd_timeout(const char* text) {
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || !(seconds <= 3600)) return std::nullopt;
  return seconds;
}

}  // namespace harmonia::common
