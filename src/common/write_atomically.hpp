#pragma once
/// @file Output files of the simulators: written whole or not at all.

#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace harmonia::common {

/// Writes to `path` through `write` on a temporary file renamed over it once every byte is out,
/// so a failure never leaves a partial file. Throws std::runtime_error naming `path`.
inline void write_atomically(const std::string& path,
                             const std::function<void(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp";
  try {
    std::ofstream out(tmp);
    write(out);
    out.close();
    if (!out) throw std::runtime_error(path + ": cannot write");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write");
  }
}

/// Writes `text` and a newline to `path`, as above.
inline void write_atomically(const std::string& path, const std::string& text) {
  write_atomically(path, [&](std::ostream& out) { out << text << "\n"; });
}

}  // namespace harmonia::common
