#pragma once
/// @file Sizes as people write them on command lines and in the environment.
///
/// The grammar is the one `harmonia.units.parse_size` reads in scenario files, checked against
/// the same vectors (tests/data/sizes.json): a number (`4096`, `2.5`, `1e3`), optional blanks,
/// and a unit. SI units are powers of ten (kB, KB, MB, GB, TB, PB), IEC units powers of two
/// (KiB, MiB, GiB, TiB, PiB), and the one-letter K, M, G, T and P are powers of two, as in dd,
/// IOR and Slurm. A number without a unit is bytes. Fractions round to the nearest byte (ties to
/// even, as Python's Decimal does).

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace harmonia::common {

namespace size_grammar {

// 128 bits, so that a size times its unit is exact before it is compared with the limit.
__extension__ typedef unsigned __int128 wide;

struct Unit {
  std::string_view name;
  unsigned ten_power;  // the unit is 10^ten_power * 2^two_power bytes
  unsigned two_power;
};

inline constexpr Unit units[] = {
    {"B", 0, 0},   {"kB", 3, 0},   {"KB", 3, 0},   {"MB", 6, 0},   {"GB", 9, 0},   {"TB", 12, 0},
    {"PB", 15, 0}, {"KiB", 0, 10}, {"MiB", 0, 20}, {"GiB", 0, 30}, {"TiB", 0, 40}, {"PiB", 0, 50},
    {"K", 0, 10},  {"M", 0, 20},   {"G", 0, 30},   {"T", 0, 40},   {"P", 0, 50},
};

/// The largest size accepted: far beyond any device, small enough that no step overflows.
inline constexpr wide max_bytes = static_cast<wide>(1) << 62;

inline wide ten_to(unsigned power) {
  wide value = 1;
  while (power-- > 0) value *= 10;
  return value;
}

inline bool is_blank(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
inline bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace size_grammar

/// Parses a size such as "64M", "1G", "16 GB", "2.5 GiB" or "4096" into bytes; nullopt when the
/// text is malformed, has an unknown unit, or comes to zero bytes or more than 2^62.
inline std::optional<size_t> parse_size(std::string_view text) {
  using namespace size_grammar;
  size_t i = 0;
  while (i < text.size() && is_blank(text[i])) ++i;
  if (i < text.size() && text[i] == '+') ++i;  // a sign is allowed; a negative size is not
  // Digits of the number, with the decimal point dropped: value = digits * 10^(exponent).
  wide digits = 0;
  int exponent = 0;
  size_t digit_count = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (!is_digit(c)) break;
    ++digit_count;
    if (digits > max_bytes * 10) {  // more digits only shift the decimal point
      if (!seen_point) ++exponent;
      continue;
    }
    digits = digits * 10 + static_cast<unsigned>(c - '0');
    if (seen_point) --exponent;
  }
  if (digit_count == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
    int power = 0;
    size_t power_digits = 0;
    for (; i < text.size() && is_digit(text[i]); ++i, ++power_digits)
      if (power < 1000) power = power * 10 + (text[i] - '0');
    if (power_digits == 0) return std::nullopt;
    exponent += negative ? -power : power;
  }
  while (i < text.size() && is_blank(text[i])) ++i;
  size_t end = text.size();
  while (end > i && is_blank(text[end - 1])) --end;
  const std::string_view unit_text = text.substr(i, end - i);
  const Unit* unit = unit_text.empty() ? &units[0] : nullptr;
  for (const Unit& candidate : units)
    if (candidate.name == unit_text) unit = &candidate;
  if (unit == nullptr) return std::nullopt;

  // bytes = digits * 10^(exponent + ten_power) * 2^two_power, rounded half to even.
  const int ten = exponent + static_cast<int>(unit->ten_power);
  wide numerator = digits;
  wide denominator = 1;
  if (ten >= 0) {
    // Past 2^62 already before the binary factor: too large (and checked before it overflows).
    if (ten > 18 || digits > max_bytes / ten_to(static_cast<unsigned>(ten))) return std::nullopt;
    numerator *= ten_to(static_cast<unsigned>(ten));
  } else {
    if (-ten > 36) return std::nullopt;  // rounds to zero bytes, or is absurdly precise
    denominator = ten_to(static_cast<unsigned>(-ten));
  }
  numerator <<= unit->two_power;  // at most 2^70 * 2^50 when there is a denominator
  wide bytes = numerator / denominator;
  const wide remainder = numerator % denominator;
  if (remainder * 2 > denominator || (remainder * 2 == denominator && bytes % 2 == 1)) ++bytes;
  if (bytes == 0 || bytes > max_bytes) return std::nullopt;
  return static_cast<size_t>(bytes);
}

}  // namespace harmonia::common
