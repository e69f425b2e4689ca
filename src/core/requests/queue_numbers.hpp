#pragma once
/// @file Numbers the per-file (or per-file-and-operation) queues of the algorithms that keep one
/// queue per file handle, in order of first use. Internal to core/requests.

#include <cstdint>

#include "core/requests/flat_map.hpp"
#include "core/requests/request_scheduler.hpp"

namespace harmonia::core::requests {

class QueueNumbers {
 public:
  /// Number of the queue of (file, op); `created` tells whether it is new. Pass one fixed `op`
  /// for one queue per file.
  std::uint32_t of(FileHandle file, Op op, bool& created) {
    const std::uint32_t number = numbers_.try_emplace(Key{file, op}, next_, created);
    if (created) ++next_;
    return number;
  }

 private:
  struct Key {
    FileHandle file;
    Op op;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::uint64_t operator()(const Key& k) const {
      return mix64(k.file * 2 + (k.op == Op::Write ? 1 : 0));
    }
  };
  FlatMap<Key, std::uint32_t, Hash> numbers_;
  std::uint32_t next_ = 0;
};

}  // namespace harmonia::core::requests
