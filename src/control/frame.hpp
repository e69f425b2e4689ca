#pragma once
/// @file Frames of the control protocol: a 4-byte big-endian length, then that many bytes of one
/// serialized Envelope (src/control/control.proto). Shared by the daemon, its tools and the
/// agent in libharmonia, whatever protobuf library encodes the Envelope.

#include <cstddef>
#include <cstdint>
#include <optional>

namespace harmonia::control {

inline constexpr size_t kHeaderBytes = 4;
/// Requests announcing more than this are refused (the connection cannot be trusted to resync).
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
/// Replies may be longer: a Status lists every job (about 100 bytes each).
inline constexpr size_t kMaxReplyBytes = 64 * 1024 * 1024;

inline void put_header(uint8_t* out, uint32_t length) {
  out[0] = static_cast<uint8_t>(length >> 24);
  out[1] = static_cast<uint8_t>(length >> 16);
  out[2] = static_cast<uint8_t>(length >> 8);
  out[3] = static_cast<uint8_t>(length);
}

/// The body length a frame's 4-byte header announces.
inline std::uint32_t frame_length(const uint8_t* header) {
  return (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) | (uint32_t{header[2]} << 8) |
         uint32_t{header[3]};
}

/// What the bytes buffered so far hold.
struct FrameScan {
  enum class Kind { NeedMore, Frame, TooLarge } kind = Kind::NeedMore;
  size_t body_length = 0;  ///< Frame: the body follows the header
};

inline FrameScan scan_frame(const uint8_t* data, size_t length, size_t max_body) {
  if (length < kHeaderBytes) return {};
  const uint32_t body = frame_length(data);
  if (body > max_body) return {FrameScan::Kind::TooLarge, body};
  if (length < kHeaderBytes + body) return {};
  return {FrameScan::Kind::Frame, body};
}

}  // namespace harmonia::control
