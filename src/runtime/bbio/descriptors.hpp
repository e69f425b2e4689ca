#pragma once
// Descriptors the library keeps open (its duplicate of each staged file, staging logs, the
// scheduler's and the buffer nodes' sockets, the agent's wake-up pipe) stay out of the numbers
// programs choose: shells give 3-9 to scripts (`exec 3>>log`), programs dup2 onto numbers they
// picked or reopen 0-2. The library takes numbers from a floor up instead of the lowest free.

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include "storage/real.hpp"

namespace harmonia::bbio {

/// Half the process's descriptor limit, at least 10, at most 4096 (a larger number would grow
/// the process's descriptor table for nothing).
inline int library_descriptor_floor() {
  static const int floor = [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
    return static_cast<int>(std::clamp<rlim_t>(limit.rlim_cur / 2, 10, 4096));
  }();
  return floor;
}

/// A close-on-exec duplicate of `fd` at the floor or above; at the lowest free number when none
/// is free there. -1 (errno set) when no duplicate can be made. errno is kept on success.
inline int duplicate_above_program(int fd) {
  const int saved = errno;
  int copy = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, library_descriptor_floor());
  if (copy < 0) copy = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy >= 0) errno = saved;
  return copy;
}

/// `fd` (one the library just opened) moved to the floor or above, the original number closed;
/// `fd` itself when it cannot be moved, or is -1 or above the floor already.
inline int above_program(int fd) {
  if (fd < 0 || fd >= library_descriptor_floor()) return fd;
  const int saved = errno;
  const int moved = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, library_descriptor_floor());
  if (moved < 0) {
    errno = saved;
    return fd;
  }
  storage::real().close(fd);
  errno = saved;
  return moved;
}

}  // namespace harmonia::bbio
