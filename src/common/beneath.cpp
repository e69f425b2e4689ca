#include "common/beneath.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace harmonia::common {

namespace {

/// Cleared for good by the first ENOSYS (a kernel before 5.6), or by use_openat2(false).
std::atomic<bool> have_openat2{true};

int sys_openat(int dirfd, const char* name, int flags, mode_t mode) {
  for (;;) {
    const long fd = syscall(SYS_openat, dirfd, name, flags, mode);
    if (fd >= 0 || errno != EINTR) return static_cast<int>(fd);
  }
}

/// The parts of `path` ("." and empty ones skipped).
std::vector<std::string> parts_of(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t next = std::min(path.find('/', at), path.size());
    std::string part = path.substr(at, next - at);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    at = next + 1;
  }
  return parts;
}

/// ELOOP when `name` beneath `dirfd` is a symbolic link, else `error`.
int link_or(int dirfd, const std::string& name, int error) {
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return ELOOP;
  return error;
}

/// open_beneath without openat2: one O_NOFOLLOW openat per part, from the part before.
int open_walking(int dirfd, const std::string& path, int flags, mode_t mode) {
  const auto parts = parts_of(path);
  if (parts.empty()) return sys_openat(dirfd, ".", flags, mode);
  int at = dirfd;
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
    const int next =
        sys_openat(at, parts[k].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    const int error = next < 0 ? link_or(at, parts[k], errno) : 0;
    if (at != dirfd) close_fd(at);
    if (next < 0) {
      errno = error;
      return -1;
    }
    at = next;
  }
  int fd = sys_openat(at, parts.back().c_str(), flags | O_NOFOLLOW, mode);
  int error = fd < 0 ? link_or(at, parts.back(), errno) : 0;
  struct stat st {};
  if (fd >= 0 && (flags & O_PATH) && fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 &&
      S_ISLNK(st.st_mode)) {
    close_fd(fd);  // O_PATH | O_NOFOLLOW opened the link itself
    fd = -1;
    error = ELOOP;
  }
  if (at != dirfd) close_fd(at);
  errno = error;
  return fd;
}

}  // namespace

bool relative_beneath(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find('\0') != std::string::npos) return false;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t next = std::min(path.find('/', at), path.size());
    if (path.compare(at, next - at, "..") == 0) return false;
    at = next + 1;
  }
  return true;
}

int open_beneath(int dirfd, const std::string& path, int flags, mode_t mode) {
  if (!relative_beneath(path)) {
    errno = EXDEV;
    return -1;
  }
  flags |= O_CLOEXEC;
  if (have_openat2.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags);
    how.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (int tries = 0;; ++tries) {
      const long fd = syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
      if (fd >= 0) return static_cast<int>(fd);
      // EAGAIN: a rename or mount elsewhere raced the lookup, which the kernel then refuses.
      if (errno == EINTR || (errno == EAGAIN && tries < 16)) continue;
      if (errno != ENOSYS) return -1;
      have_openat2 = false;
      break;
    }
  }
  return open_walking(dirfd, path, flags, mode);
}

int make_dirs_beneath(int dirfd, const std::string& dir, mode_t mode, int flags) {
  flags |= O_DIRECTORY | O_CLOEXEC;
  if (dir.empty()) return sys_openat(dirfd, ".", flags, 0);
  if (!relative_beneath(dir)) {
    errno = EXDEV;
    return -1;
  }
  const auto parts = parts_of(dir);
  int at = dirfd;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    // mkdirat never follows a link at the name it makes (EEXIST); the open then refuses it.
    const bool made = mkdirat(at, parts[k].c_str(), mode) == 0;
    if (made) {
      // The umask took bits off: the mode is set again through a descriptor of what was made
      // (never by name, which another user could have swapped for a link meanwhile).
      const int fresh = open_beneath(at, parts[k], O_RDONLY | O_DIRECTORY);
      if (fresh >= 0) (void)fchmod(fresh, mode);
      close_fd(fresh);
    }
    int next =
        !made && errno != EEXIST
            ? -1
            : open_beneath(at, parts[k], k + 1 < parts.size() ? O_PATH | O_DIRECTORY : flags);
    const int error = errno;
    if (at != dirfd) close_fd(at);
    if (next < 0) {
      errno = error;
      return -1;
    }
    at = next;
  }
  return at;
}

std::pair<std::string, std::string> split_last(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

std::string beneath_error(const std::string& path, int error) {
  switch (error) {
    case ELOOP:
      return path + ": refused: a symbolic link on the way (links are never followed here)";
    case EXDEV:
      return path + ": refused: the name would leave its root (absolute, or a \"..\" part)";
    default:
      return path + ": " + std::strerror(error);
  }
}

void close_fd(int fd) {
  const int error = errno;
  if (fd >= 0) syscall(SYS_close, fd);
  errno = error;
}

void use_openat2(bool use) { have_openat2 = use; }

}  // namespace harmonia::common
