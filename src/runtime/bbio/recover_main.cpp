// harmonia-recover DIR: after an application staging to DIR was killed, replay every complete
// record of its logs to the target files, ignore torn tails, and remove the logs. Running it
// again does nothing more (idempotent). Prints one JSON object per log on stdout.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/bbio/log_format.hpp"
#include "runtime/bbio/real.hpp"

using namespace harmonia::bbio;

namespace {

struct LogName {
  std::string file;
  std::string host;
  long pid = 0;
  long sequence = 0;
};

/// "<host>-<pid>-<sequence>.hlog"; the host may itself contain dashes.
bool parse_name(const std::string& file, LogName& out) {
  const std::string suffix = kLogSuffix;
  if (file.size() <= suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string stem = file.substr(0, file.size() - suffix.size());
  const auto last = stem.rfind('-');
  if (last == std::string::npos || last == 0) return false;
  const auto middle = stem.rfind('-', last - 1);
  if (middle == std::string::npos) return false;
  try {
    out = {file, stem.substr(0, middle), std::stol(stem.substr(middle + 1, last - middle - 1)),
           std::stol(stem.substr(last + 1))};
  } catch (...) {
    return false;
  }
  return true;
}

bool process_alive(const LogName& log) {
  char host[64] = "";
  gethostname(host, sizeof(host) - 1);
  if (log.host != host) return false;  // another node's process: its owner is gone from here
  return kill(static_cast<pid_t>(log.pid), 0) == 0 || errno == EPERM;
}

/// A JSON string literal; bytes that are not printable ASCII (a damaged header's path may hold
/// anything) are escaped, so the output is always valid JSON.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: harmonia-recover STAGE_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  DIR* listing = opendir(dir.c_str());
  if (!listing) {
    std::fprintf(stderr, "harmonia-recover: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<LogName> logs;
  while (const dirent* entry = readdir(listing)) {
    LogName name;
    if (parse_name(entry->d_name, name)) logs.push_back(name);
  }
  closedir(listing);
  // One process's logs in creation order; processes in pid order (their relative order is
  // unknown: they should not have written the same bytes of the same file).
  std::sort(logs.begin(), logs.end(), [](const LogName& a, const LogName& b) {
    return std::tie(a.host, a.pid, a.sequence) < std::tie(b.host, b.pid, b.sequence);
  });

  int failures = 0;
  for (const auto& log : logs) {
    const std::string path = dir + "/" + log.file;
    std::string status = "replayed";
    LogScan scan;
    if (process_alive(log)) {
      status = "skipped: its process is still running";
    } else {
      const int fd = real().open(path.c_str(), O_RDONLY | O_CLOEXEC);
      int target = -1;
      bool write_failed = false;
      scan_log(fd, scan, [&](const RecordHeader& record, const char* data) {
        if (target < 0)
          target = real().open(scan.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        size_t done = 0;
        while (target >= 0 && done < record.length) {
          const ssize_t n = real().pwrite64(target, data + done, record.length - done,
                                            static_cast<off64_t>(record.offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
        write_failed = done < record.length;
        return !write_failed;
      });
      if (fd >= 0) real().close(fd);
      if (!scan.error.empty()) {
        status = "error: " + scan.error;
        scan.target.clear();  // whatever the damaged header said is not a path to trust
        ++failures;
      } else if (write_failed || (target < 0 && scan.records > 0) ||
                 (target >= 0 && real().fsync(target) != 0)) {
        status = std::string("error: cannot write ") + scan.target + ": " + std::strerror(errno);
        ++failures;
      } else {
        unlink(path.c_str());  // everything complete is in the file now
      }
      if (target >= 0) real().close(target);
    }
    std::printf(
        "{\"log\": %s, \"target\": %s, \"records\": %llu, \"bytes\": %llu, \"torn_tail\": %s, "
        "\"status\": %s}\n",
        quoted(path).c_str(), quoted(scan.target).c_str(),
        static_cast<unsigned long long>(scan.records), static_cast<unsigned long long>(scan.bytes),
        scan.torn_tail ? "true" : "false", quoted(status).c_str());
  }
  if (logs.empty()) std::fprintf(stderr, "harmonia-recover: %s: no staging logs\n", dir.c_str());
  return failures > 0 ? 1 : 0;
}
