#pragma once
// Descriptors the library keeps open (its duplicate of each staged file, staging logs, the
// scheduler's and the buffer nodes' sockets, the agent's wake-up pipe) stay out of the numbers
// programs choose: shells give 3-9 to scripts (`exec 3>>log`), programs dup2 onto numbers they
// picked or reopen 0-2. The library takes numbers from a floor up instead of the lowest free,
// and a program that closes what it did not open (closefrom(3), close_range over the table)
// passes the library's by.

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

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

/// The descriptors the library keeps, by number, with the identity (device, inode) each had when
/// the library took it. Never destroyed: closes run during and after static destruction.
struct KeptDescriptors {
  std::mutex mutex;
  std::map<int, std::pair<dev_t, ino_t>> identity;
};

inline KeptDescriptors& kept_descriptors() {
  static auto* const kept = [] {
    auto* made = new KeptDescriptors;
    // Held across fork, so that a child never starts with it locked by a thread it lacks.
    pthread_atfork([] { kept_descriptors().mutex.lock(); },
                   [] { kept_descriptors().mutex.unlock(); },
                   [] { kept_descriptors().mutex.unlock(); });
    return made;
  }();
  return *kept;
}

/// Records `fd` (-1 passes) as the library's; returns it.
inline int keep(int fd) {
  if (fd < 0) return fd;
  const int saved = errno;
  struct stat64 st {};
  if (storage::real().fstat64(fd, &st) == 0) {
    KeptDescriptors& kept = kept_descriptors();
    const std::lock_guard lock(kept.mutex);
    kept.identity[fd] = {st.st_dev, st.st_ino};
  }
  errno = saved;
  return fd;
}

/// Closes a descriptor the library kept (-1 passes).
inline void close_kept(int fd) {
  if (fd < 0) return;
  {
    KeptDescriptors& kept = kept_descriptors();
    const std::lock_guard lock(kept.mutex);
    kept.identity.erase(fd);
  }
  storage::real().close(fd);
}

/// Whether `fd` is a descriptor the library keeps, still on the file it took (a number the
/// library closed behind its record, now the program's, is the program's).
inline bool library_keeps(int fd) {
  if (fd < library_descriptor_floor()) return false;  // the numbers programs use
  KeptDescriptors& kept = kept_descriptors();
  std::pair<dev_t, ino_t> identity;
  {
    const std::lock_guard lock(kept.mutex);
    const auto found = kept.identity.find(fd);
    if (found == kept.identity.end()) return false;
    identity = found->second;
  }
  const int saved = errno;
  struct stat64 st {};
  const bool same =
      storage::real().fstat64(fd, &st) == 0 && std::pair{st.st_dev, st.st_ino} == identity;
  errno = saved;
  return same;
}

/// The library's descriptors in [first, last], in order.
inline std::vector<int> kept_between(unsigned first, unsigned last) {
  std::vector<int> numbers;
  {
    KeptDescriptors& kept = kept_descriptors();
    const std::lock_guard lock(kept.mutex);
    for (auto it = kept.identity.lower_bound(static_cast<int>(std::min(first, 0x7fffffffU)));
         it != kept.identity.end() && static_cast<unsigned>(it->first) <= last; ++it)
      numbers.push_back(it->first);
  }
  std::erase_if(numbers, [](int fd) { return !library_keeps(fd); });
  return numbers;
}

/// A close-on-exec duplicate of `fd` at the floor or above; at the lowest free number when none
/// is free there. -1 (errno set) when no duplicate can be made. errno is kept on success.
inline int duplicate_above_program(int fd) {
  const int saved = errno;
  int copy = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, library_descriptor_floor());
  if (copy < 0) copy = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy >= 0) errno = saved;
  return keep(copy);
}

/// `fd` (one the library just opened) moved to the floor or above, the original number closed;
/// `fd` itself when it cannot be moved, or is -1 or above the floor already.
inline int above_program(int fd) {
  if (fd < 0 || fd >= library_descriptor_floor()) return keep(fd);
  const int saved = errno;
  const int moved = storage::real().fcntl(fd, F_DUPFD_CLOEXEC, library_descriptor_floor());
  if (moved < 0) {
    errno = saved;
    return keep(fd);
  }
  storage::real().close(fd);
  errno = saved;
  return keep(moved);
}

}  // namespace harmonia::bbio
