#pragma once
/// @file Sending length-prefixed frames (control/frame.hpp) over a socket, for the daemons and
/// tools that encode with libprotobuf, and the send loop every sender shares.

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "control/frame.hpp"

namespace harmonia::common {

/// Appends `message` (a libprotobuf message) to `out` as one frame.
template <class Message>
void append_frame(std::string& out, const Message& message) {
  const std::size_t length = message.ByteSizeLong();
  const std::size_t at = out.size();
  out.resize(at + control::kHeaderBytes + length);
  auto* bytes = reinterpret_cast<std::uint8_t*>(out.data() + at);
  control::put_header(bytes, static_cast<std::uint32_t>(length));
  message.SerializeWithCachedSizesToArray(bytes + control::kHeaderBytes);
}

/// Sends all of `bytes` on a blocking socket; false once the peer is gone.
inline bool send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace harmonia::common
