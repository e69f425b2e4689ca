#include "common/unix_socket.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace harmonia::common {

int listen_unix(const std::string& path, const std::string& label, const std::string& owner,
                mode_t mode) {
  const std::string where = label + " " + path;
  const auto failure = [&where] { return std::runtime_error(where + ": " + std::strerror(errno)); };
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    throw std::runtime_error(where + ": longer than " +
                             std::to_string(sizeof(address.sun_path) - 1) + " bytes");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw failure();
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(probe);
    if (alive) {
      close(fd);
      throw std::runtime_error(where + ": another " + owner + " is listening on it");
    }
    unlink(path.c_str());
  }
  const mode_t old = umask(static_cast<mode_t>(~mode & 0777));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  umask(old);
  if (!bound || listen(fd, 1024) != 0) {
    const auto error = failure();
    close(fd);
    throw error;
  }
  return fd;
}

}  // namespace harmonia::common
