#pragma once
/// @file The one rule for file names the programs pass to each other (relative to the PFS root):
/// header-only, so that the scheduler daemon and the buffer nodes share it without linking the
/// storage objects libharmonia carries.

#include <limits.h>

#include <algorithm>
#include <string>

namespace harmonia::common {

/// Whether `name` is a plain relative path: 1 to 4096 bytes, no NUL, not absolute, and every
/// part non-empty, neither "." nor "..", at most NAME_MAX bytes (so it never leaves the root and
/// has one spelling).
inline bool plain_relative_name(const std::string& name) {
  if (name.empty() || name.size() > 4096 || name[0] == '/' || name.find('\0') != std::string::npos)
    return false;
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t next = std::min(name.find('/', at), name.size());
    const std::size_t length = next - at;
    if (length == 0 || length > NAME_MAX || name.compare(at, length, ".") == 0 ||
        name.compare(at, length, "..") == 0)
      return false;
    at = next + 1;
  }
  return true;
}

}  // namespace harmonia::common
