#pragma once
/// @file Paths the programs and libharmonia share helpers for.

#include <sys/stat.h>

#include <cerrno>
#include <string>

namespace harmonia::common {

/// mkdir -p of the directories above `path`, each made with `mode` (less the umask); false with
/// errno when one cannot be made.
inline bool make_parents(const std::string& path, mode_t mode) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    if (mkdir(path.substr(0, at).c_str(), mode) != 0 && errno != EEXIST) return false;
  return true;
}

}  // namespace harmonia::common
