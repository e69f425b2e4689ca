// The BBIO C API (include/harmonia/bbio.h) and the I/O phase markers.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>

#include "harmonia/bbio.h"
#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/phases.hpp"
#include "runtime/bbio/registry.hpp"
#include "storage/real.hpp"

using namespace harmonia::bbio;
using harmonia::storage::real;

namespace {

template <class Body>
int guarded(Body body) {
  try {
    return body();
  } catch (...) {
    errno = EIO;
    return -1;
  }
}

bool valid_fd(int fd) { return real().fcntl(fd, F_GETFD) >= 0; }

struct PhaseState {
  std::mutex mutex;
  bool open = false;
  std::string name;
  double started = 0;
  size_t expected = 0;
};
PhaseState& phases() {
  static auto* state = new PhaseState();  // never destroyed: may be used during exit
  return *state;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int BBIO_Init(const char* path, size_t size) {
  return guarded([&] {
    // An environment the library cannot use (reported on stderr) keeps it from staging.
    if (!environment().errors.empty()) {
      errno = EINVAL;
      return -1;
    }
    Config config = current_config();
    if (path) {
      if (const auto why = check_stage_dir(path); !why.empty()) {
        errno = EINVAL;
        return -1;
      }
      config.stage_dir = path;
      config.exclude.emplace_back(path);
    } else {
      config.stage_dir.reset();
    }
    if (size > 0) config.file_capacity = size;
    config.enabled = true;
    if (flush_all() != 0) return -1;
    set_config(config);
    return 0;
  });
}

__attribute__((visibility("default"))) int BBIO_Enable(int fd) {
  return guarded([&] { return stage_fd(fd); });
}

__attribute__((visibility("default"))) int BBIO_Disable(int fd) {
  if (!valid_fd(fd)) return -1;
  return guarded([&] { return unstage(fd); });
}

__attribute__((visibility("default"))) int BBIO_Flush(int fd) {
  if (!valid_fd(fd)) return -1;
  StagedFile* file = staged(fd);
  if (!file) return 0;
  return guarded([&] {
    std::lock_guard lock(file->mutex);
    return file->flush();
  });
}

__attribute__((visibility("default"))) int BBIO_Finalize(void) {
  return guarded([] { return unstage_all(true); });
}

__attribute__((visibility("default"))) int BBIO_On_flush(int fd, BBIO_Callback cb) {
  StagedFile* file = staged(fd);
  if (!file) {
    errno = valid_fd(fd) ? EINVAL : EBADF;
    return -1;
  }
  std::lock_guard lock(file->mutex);
  file->on_flush = cb;
  return 0;
}

__attribute__((visibility("default"))) int harmonia_io_begin(const char* name,
                                                             size_t expected_bytes) {
  return guarded([&] {
    auto& p = phases();
    std::lock_guard lock(p.mutex);
    if (p.open) {
      errno = EALREADY;  // phases do not nest
      return -1;
    }
    p.open = true;
    p.name = name ? name : "";
    p.started = wall_clock();
    p.expected = expected_bytes;
    trace_line(current_config().phase_trace,
               "{\"event\": \"begin\", \"name\": " + json_string(p.name) + ", \"pid\": " +
                   std::to_string(getpid()) + ", \"time\": " + std::to_string(p.started) +
                   ", \"expected_bytes\": " + std::to_string(expected_bytes) + "}");
    agent::phase_begin(p.name, expected_bytes);
    return 0;
  });
}

__attribute__((visibility("default"))) int harmonia_io_end(void) {
  return guarded([&] {
    auto& p = phases();
    std::lock_guard lock(p.mutex);
    if (!p.open) {
      errno = EINVAL;
      return -1;
    }
    p.open = false;
    const double ended = wall_clock();
    trace_line(current_config().phase_trace,
               "{\"event\": \"end\", \"name\": " + json_string(p.name) + ", \"pid\": " +
                   std::to_string(getpid()) + ", \"time\": " + std::to_string(ended) +
                   ", \"duration\": " + std::to_string(ended - p.started) + "}");
    agent::phase_end();
    return 0;
  });
}

// Fortran (gfortran's convention: arguments by reference, the character length appended as
// size_t): `call harmonia_io_begin('checkpoint')` and `call harmonia_io_end()`, as
// `harmonia phases --source --inject` writes them.
__attribute__((visibility("default"))) void harmonia_io_begin_(const char* name, size_t length) {
  std::string text(name ? name : "", name ? length : 0);
  while (!text.empty() && text.back() == ' ') text.pop_back();  // Fortran pads with blanks
  (void)harmonia_io_begin(text.c_str(), 0);
}

__attribute__((visibility("default"))) void harmonia_io_end_(void) { (void)harmonia_io_end(); }

}  // extern "C"
