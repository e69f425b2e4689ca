#pragma once
/// @file Length-prefixed frames (control/frame.hpp) over a socket: encoding with libprotobuf
/// (the daemons and tools) or protobuf-c (libharmonia), and the send and receive loops every
/// peer shares.

#include <sys/socket.h>
#include <sys/uio.h>

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

/// `message` (a protobuf-c message) as one frame, given its generated size and pack functions.
template <class Message>
std::string packed_frame(const Message& message, std::size_t (*size)(const Message*),
                         std::size_t (*pack)(const Message*, std::uint8_t*)) {
  const std::size_t length = size(&message);
  std::string frame(control::kHeaderBytes + length, '\0');
  auto* bytes = reinterpret_cast<std::uint8_t*>(frame.data());
  control::put_header(bytes, static_cast<std::uint32_t>(length));
  pack(&message, bytes + control::kHeaderBytes);
  return frame;
}

/// Sends all of `parts` (`count` of them) on a blocking socket; false once the peer is gone.
inline bool send_all(int fd, iovec* parts, int count) {
  for (;;) {
    while (count > 0 && parts->iov_len == 0) {  // nothing to send there
      ++parts;
      --count;
    }
    if (count == 0) return true;
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<std::size_t>(count);
    ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    while (count > 0 && static_cast<std::size_t>(n) >= parts->iov_len) {
      n -= static_cast<ssize_t>(parts->iov_len);
      ++parts;
      --count;
    }
    if (count > 0) {
      parts->iov_base = static_cast<char*>(parts->iov_base) + n;
      parts->iov_len -= static_cast<std::size_t>(n);
    }
  }
}

/// Sends all of `bytes` on a blocking socket; false once the peer is gone.
inline bool send_all(int fd, const std::string& bytes) {
  iovec whole{const_cast<char*>(bytes.data()), bytes.size()};
  return send_all(fd, &whole, 1);
}

/// Receives exactly `length` bytes from a blocking socket; before each read `ready()` may wait
/// for the socket and answer false to give up (a timeout). False at the end of the stream, on an
/// error, or when `ready()` gave up.
template <class Ready>
bool receive_all(int fd, char* data, std::size_t length, Ready ready) {
  while (length > 0) {
    if (!ready()) return false;
    const ssize_t n = ::recv(fd, data, length, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    length -= static_cast<std::size_t>(n);
  }
  return true;
}

/// receive_all with no waiting of its own.
inline bool receive_all(int fd, char* data, std::size_t length) {
  return receive_all(fd, data, length, [] { return true; });
}

}  // namespace harmonia::common
