#pragma once
/// @file A small open-addressing hash map (linear probing, backward-shift deletion) for the
/// request schedulers' per-request maps (live ids, queue numbers), without std::unordered_map's
/// node allocation per entry. Internal to core/requests.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace harmonia::core::requests {

/// splitmix64's finalizer: offsets and ids are often multiples of large powers of two.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <class Key, class Value, class Hash>
class FlatMap {
 public:
  FlatMap() : cells_(16) {}

  std::size_t size() const { return size_; }

  /// The value of `key`, or nullptr. Valid until the next insertion or erasure.
  Value* find(const Key& key) {
    for (std::size_t i = home(key);; i = (i + 1) & mask()) {
      if (!cells_[i].used) return nullptr;
      if (cells_[i].key == key) return &cells_[i].value;
    }
  }
  const Value* find(const Key& key) const { return const_cast<FlatMap*>(this)->find(key); }

  /// The value of `key`, inserted as `value` if absent; `inserted` tells which.
  Value& try_emplace(const Key& key, const Value& value, bool& inserted) {
    if ((size_ + 1) * 2 > cells_.size()) grow();
    std::size_t i = home(key);
    for (; cells_[i].used; i = (i + 1) & mask()) {
      if (cells_[i].key == key) {
        inserted = false;
        return cells_[i].value;
      }
    }
    cells_[i] = {key, value, true};
    ++size_;
    inserted = true;
    return cells_[i].value;
  }

  /// Removes `key` if present.
  void erase(const Key& key) {
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask()) {
      if (!cells_[i].used) return;
      if (cells_[i].key == key) break;
    }
    // Backward shift: move later cells of the probe run into the hole unless their home slot
    // lies cyclically in (hole, cell].
    for (std::size_t j = (i + 1) & mask(); cells_[j].used; j = (j + 1) & mask()) {
      const std::size_t k = home(cells_[j].key);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) continue;
      cells_[i] = std::move(cells_[j]);
      i = j;
    }
    cells_[i].used = false;
    --size_;
  }

 private:
  struct Cell {
    Key key{};
    Value value{};
    bool used = false;
  };

  std::size_t mask() const { return cells_.size() - 1; }
  std::size_t home(const Key& key) const { return static_cast<std::size_t>(Hash()(key)) & mask(); }

  void grow() {
    std::vector<Cell> old(cells_.size() * 2);
    old.swap(cells_);
    size_ = 0;
    for (auto& c : old) {
      if (!c.used) continue;
      bool inserted = false;
      try_emplace(c.key, c.value, inserted);
    }
  }

  std::vector<Cell> cells_;
  std::size_t size_ = 0;
};

}  // namespace harmonia::core::requests
