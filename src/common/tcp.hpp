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

/// A connected socket to `spec` ("HOST:PORT"), with TCP_NODELAY. Throws std::runtime_error
/// reading "LABEL SPEC: reason".
int connect_tcp(const std::string& spec, const std::string& label);

}  // namespace harmonia::common
