#include "runtime/bbio/report.hpp"

#include <unistd.h>

#include <mutex>
#include <set>

#include "storage/real.hpp"

namespace harmonia::bbio {

void report(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (!said.insert(message).second) return;
  const std::string line = "libharmonia: " + message + "\n";
  (void)storage::real().write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace harmonia::bbio
