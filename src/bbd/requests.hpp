#pragma once
/// @file A buffer node's requests (bb.proto): one frame body decoded and answered against the
/// node's store. No sockets: harmonia-bbd's connections and the fuzz tests call the same code.

#include <cstddef>
#include <string>

#include "bbd/bb.pb.h"
#include "bbd/store.hpp"

namespace harmonia::bbd {

/// The largest request frame body a node reads: a write of 16 MiB and its envelope.
constexpr std::size_t kMaxRequestBytes = (16UL << 20) + 4096;

/// The response to one frame body; MALFORMED when it holds no valid Request.
bb::Response answer(Store& store, const std::string& body);

/// The response to a frame announcing `length` > kMaxRequestBytes (the node then closes the
/// connection: the stream cannot be resynchronised).
bb::Response refuse_oversized(std::size_t length);

}  // namespace harmonia::bbd
