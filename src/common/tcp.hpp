#pragma once
/// @file TCP sockets of the daemons and their tools, from "HOST:PORT" specifications.

#include <cstdint>
#include <string>

namespace harmonia::common {

/// A listening socket on `spec` ("HOST:PORT"; port 0 picks a free one, returned in `port`),
/// created with `socket_flags` added (SOCK_NONBLOCK, ...) and SOCK_CLOEXEC. Throws
/// std::runtime_error reading "LABEL SPEC: reason".
int listen_tcp(const std::string& spec, const std::string& label, int socket_flags,
               std::uint16_t& port);

/// Whether the listening socket `fd` is bound to a loopback address only (its peers are then
/// all on this host, and the kernel can tell who they are: common::peer_identity).
bool loopback_only(int fd);

/// A connected socket to `spec` ("HOST:PORT"), with TCP_NODELAY. Throws std::runtime_error
/// reading "LABEL SPEC: reason".
int connect_tcp(const std::string& spec, const std::string& label);

}  // namespace harmonia::common
