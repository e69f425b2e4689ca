#include "runtime/bbio/phases.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "runtime/bbio/registry.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio {

using storage::real;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

double wall_clock() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void trace_line(const std::string& path, const std::string& json) {
  if (path.empty()) return;
  const int fd = real().open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    report("HARMONIA_PHASE_TRACE=" + path + ": cannot open; phases are not traced");
    return;
  }
  const std::string out = json + "\n";
  (void)real().write(fd, out.data(), out.size());
  real().close(fd);
}

namespace {

struct Detector {
  std::mutex mutex;
  bool configured = false;  // read the configuration once
  std::string trace;        // empty: not tracing
  double gap = 1.0;
  bool open = false;
  double begin = 0, last = 0;
  unsigned long long written = 0, read = 0, requests = 0;
  size_t smallest = 0, largest = 0;
  std::set<std::string> files;
  std::map<int, unsigned long long> sizes;  // log2 bucket of the request size -> count

  void close_phase() {
    if (!open) return;
    open = false;
    std::string buckets;
    for (const auto& [log2, count] : sizes)
      buckets += (buckets.empty() ? "\"" : ", \"") + std::to_string(1ULL << log2) +
                 "\": " + std::to_string(count);
    char times[160];
    snprintf(times, sizeof(times), "\"begin\": %.6f, \"end\": %.6f, \"duration\": %.6f", begin,
             last, last - begin);
    trace_line(trace, "{\"event\": \"phase\", \"source\": \"detected\", \"pid\": " +
                          std::to_string(getpid()) + ", " + times + ", \"bytes_written\": " +
                          std::to_string(written) + ", \"bytes_read\": " + std::to_string(read) +
                          ", \"requests\": " + std::to_string(requests) +
                          ", \"files\": " + std::to_string(files.size()) +
                          ", \"request_min\": " + std::to_string(smallest) + ", \"request_max\": " +
                          std::to_string(largest) + ", \"request_sizes\": {" + buckets + "}}");
    written = read = requests = 0;
    smallest = largest = 0;
    files.clear();
    sizes.clear();
  }
};

Detector& detector() {
  static auto* d = new Detector();  // never destroyed: used until the very end of the process
  return *d;
}

}  // namespace

void note_io(const std::string& path, size_t bytes, bool write) {
  Detector& d = detector();
  std::lock_guard lock(d.mutex);
  if (!d.configured) {
    const Config config = current_config();
    d.trace = config.phase_trace;
    d.gap = config.phase_gap;
    d.configured = true;
  }
  if (d.trace.empty() || bytes == 0) return;
  const double now = wall_clock();
  if (d.open && now - d.last > d.gap) d.close_phase();
  if (!d.open) {
    d.open = true;
    d.begin = now;
  }
  d.last = now;
  (write ? d.written : d.read) += bytes;
  d.requests += 1;
  d.smallest = d.smallest == 0 ? bytes : std::min(d.smallest, bytes);
  d.largest = std::max(d.largest, bytes);
  d.files.insert(path);
  int log2 = 0;
  while ((2ULL << log2) <= bytes) ++log2;
  d.sizes[log2] += 1;
}

void end_detected_phase() {
  Detector& d = detector();
  std::lock_guard lock(d.mutex);
  d.close_phase();
}

}  // namespace harmonia::bbio
