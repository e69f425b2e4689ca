#include "common/tcp.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/identity.hpp"

namespace harmonia::common {

namespace {

/// The address of `spec`; the caller frees it with freeaddrinfo.
addrinfo* resolve(const std::string& spec, const std::string& label, bool passive) {
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error(label + " " + spec + ": expected HOST:PORT");
  // getaddrinfo takes a port modulo 65536 (99999 is 34463): range-check a numeric one first.
  const std::string port = spec.substr(colon + 1);
  if (port.empty()) throw std::runtime_error(label + " " + spec + ": expected HOST:PORT");
  const bool numeric = port.find_first_not_of("0123456789") == std::string::npos;
  unsigned long number = 0;  // saturates above the range
  for (const char digit : numeric ? port : std::string())
    number = std::min(number * 10 + static_cast<unsigned long>(digit - '0'), 65536UL);
  if (number > 65535)
    throw std::runtime_error(label + " " + spec + ": port " + port + " out of range (0 to 65535)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE | AI_NUMERICSERV : 0;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(spec.substr(0, colon).c_str(), port.c_str(), &hints, &found);
      rc != 0)
    throw std::runtime_error(label + " " + spec + ": " + gai_strerror(rc));
  return found;
}

}  // namespace

int listen_tcp(const std::string& spec, const std::string& label, int socket_flags,
               std::uint16_t& port) {
  addrinfo* found = resolve(spec, label, true);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | socket_flags, 0);
  const int yes = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool ok =
      fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 1024) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!ok) {
    if (fd >= 0) close(fd);
    throw std::runtime_error(label + " " + spec + ": " + std::strerror(error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

int connect_tcp(const std::string& spec, const std::string& label) {
  addrinfo* found = resolve(spec, label, false);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!ok) {
    if (fd >= 0) close(fd);
    throw std::runtime_error(label + " " + spec + ": cannot connect: " + std::strerror(error));
  }
  const int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  return fd;
}

}  // namespace harmonia::common

namespace harmonia::common {

bool loopback_only(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 && loopback(address);
}

}  // namespace harmonia::common
