#pragma once
/// @file Unix-domain sockets of the daemons and their tools, and the connection libharmonia and
/// harmonia-agentd make to their upstream ("PATH", "unix:PATH" or "tcp:HOST:PORT").
///
/// The connecting helpers are header-only and take the function that closes a descriptor:
/// libharmonia compiles them into itself (it links no shared C++ code) and must close through
/// the real close(), not its own interposed one.

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstring>
#include <string>

namespace harmonia::common {

/// A non-blocking, close-on-exec socket listening on `path`, whose file gets permissions `mode`
/// (set through the umask while binding, so the file never has wider ones). A socket file left by
/// a dead `owner` is replaced; a live one's is not. Throws std::runtime_error reading
/// "LABEL PATH: reason".
int listen_unix(const std::string& path, const std::string& label, const std::string& owner,
                mode_t mode);

/// A blocking, close-on-exec connection to the unix socket `path`, or -1.
template <class Close>
int connect_unix(const std::string& path, Close close_fd) {
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  if (path.size() >= sizeof(where.sun_path)) return -1;
  std::memcpy(where.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof(where)) != 0) {
    close_fd(fd);
    return -1;
  }
  return fd;
}

/// A blocking, close-on-exec connection to `address` ("PATH", "unix:PATH" or "tcp:HOST:PORT",
/// the latter with TCP_NODELAY), or -1.
template <class Close>
int connect_address(const std::string& address, Close close_fd) {
  if (address.rfind("tcp:", 0) == 0) {
    const std::string spec = address.substr(4);
    const auto colon = spec.rfind(':');
    if (colon == std::string::npos) return -1;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(spec.substr(0, colon).c_str(), spec.substr(colon + 1).c_str(), &hints,
                    &found) != 0)
      return -1;
    const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
    freeaddrinfo(found);
    if (!ok) {
      if (fd >= 0) close_fd(fd);
      return -1;
    }
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    return fd;
  }
  return connect_unix(address.rfind("unix:", 0) == 0 ? address.substr(5) : address, close_fd);
}

}  // namespace harmonia::common
