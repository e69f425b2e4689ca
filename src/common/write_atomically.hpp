#pragma once
/// @file Output files of the simulators: written whole or not at all.

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace harmonia::common {

/// Writes `text` and a newline to `path` through a temporary file renamed over it, so a failure
/// never leaves a partial file. Throws std::runtime_error naming `path`.
inline void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text << "\n";
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error(path + ": cannot write");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write");
  }
}

}  // namespace harmonia::common
