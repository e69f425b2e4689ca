#pragma once
/// @file The request-scheduler interface of the forwarding layer (issue 5): requests in
/// (`enqueue`), batches out (`dequeue`), completions back (`release`). One file per algorithm in
/// this folder; `core/requests/registry.hpp` makes them by name. The exact rules of every
/// algorithm are in docs/request-schedulers.md.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/requests/flat_map.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core::requests {

using RequestId = std::uint64_t;
using FileHandle = std::uint64_t;
using ServerId = int;
/// Nanoseconds since the start of the run. Integer so that window boundaries are exact.
using Time = std::int64_t;

/// "Never": no time-driven reason to ask the scheduler again.
inline constexpr Time kNever = std::numeric_limits<Time>::max();
inline constexpr Time kMicrosecond = 1000;

/// Seconds (the simulator's clock) to `Time`, rounded to the nearest nanosecond.
Time from_seconds(double seconds);
double to_seconds(Time time);

/// One I/O request as a client sent it to the forwarding node.
struct Request {
  RequestId id = 0;
  FileHandle file = 0;
  std::uint64_t offset = 0;  ///< bytes
  std::uint64_t length = 0;  ///< bytes, > 0
  Op op = Op::Read;
  AppId app = 0;
  ServerId server = 0;  ///< data server holding `offset` (from the file's striping)
  Time arrival = 0;
};

/// One request sent to the data servers: a single original request, or an aggregate of
/// contiguous ones (same file, same operation, each part starting where the previous one ends).
struct Dispatch {
  FileHandle file = 0;
  Op op = Op::Read;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  ServerId server = 0;  ///< the first part's server
  /// The original requests, in offset order: part i covers
  /// [parts[i].offset, parts[i].offset + parts[i].length) of the dispatch's range, so a result is
  /// split back by offset. Every part must be `release`d.
  std::vector<Request> parts;
};

/// What one `dequeue` issues.
struct Batch {
  std::vector<Dispatch> dispatches;  ///< in issue order; empty when the scheduler waits
  /// When to call `dequeue` again if nothing else happens: `now` when more can be issued at once,
  /// a later time when a window or quantum policy is waiting for it, `kNever` when only a new
  /// request or a release can change anything. Always call again after `enqueue` and `release`.
  Time retry_at = kNever;
};

/// Aggregation limits of one algorithm (`<name>.max_requests`, `<name>.max_bytes`).
struct AggregationLimits {
  std::size_t max_requests = 1;  ///< 1 disables aggregation
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();
};

/// Base class of every request scheduler. It checks the protocol (unique ids, clock never going
/// backwards, releases only of issued requests), owns the queued requests and builds dispatches,
/// merging contiguous requests when the algorithm aggregates. Algorithms keep their own order over
/// the queued requests' slots and implement the hooks.
class RequestScheduler {
 public:
  virtual ~RequestScheduler() = default;
  RequestScheduler(const RequestScheduler&) = delete;
  RequestScheduler& operator=(const RequestScheduler&) = delete;

  const std::string& name() const { return name_; }

  /// Queue a request. Throws std::invalid_argument for a zero length, an offset range that
  /// overflows, an id that is queued or in flight, or an arrival earlier than a previous call's
  /// time.
  void enqueue(const Request& request);
  /// The next batch to issue at `now` (never earlier than a previous call's time).
  Batch dequeue(Time now);
  /// A dispatched request completed after `latency` ns. Throws std::logic_error when `id` is not
  /// in flight, std::invalid_argument for a negative latency.
  void release(RequestId id, Time latency);

  std::size_t queued() const { return queued_; }
  /// Dispatched original requests not yet released.
  std::size_t in_flight() const { return live_.size() - queued_; }

 protected:
  using Slot = std::uint32_t;
  static constexpr Slot kNone = std::numeric_limits<Slot>::max();
  /// Which queued requests may be merged together, besides same file and operation.
  enum class Scope { Any, SameServer };

  RequestScheduler(std::string name, AggregationLimits limits, Scope scope = Scope::Any);

  /// A request was queued in `slot`; `seq(slot)` numbers requests in enqueue order.
  virtual void on_enqueue(Slot slot) = 0;
  /// Fill `out` (dispatches and retry_at) for `now`, with `issue`.
  virtual void on_dequeue(Time now, Batch& out) = 0;
  /// `slot` was merged into a dispatch as a non-head part: forget it.
  virtual void on_merged(Slot slot) = 0;
  /// Every part of a dispatch issued with `tag` was released; `latency` is the largest reported.
  virtual void on_completed(std::uint32_t /*tag*/, Time /*latency*/) {}

  const Request& request(Slot slot) const { return entries_[slot].request; }
  std::uint64_t seq(Slot slot) const { return entries_[slot].seq; }
  const AggregationLimits& limits() const { return limits_; }
  /// Whether `slot` holds a queued request (for algorithms that delete lazily: a slot that was
  /// issued and then reused has another `seq`).
  bool is_queued(Slot slot) const { return entries_[slot].queued; }
  /// Two fields of a queued slot that the algorithm may use freely (e.g. its queue's index and
  /// a sort key).
  std::uint32_t& slot_queue(Slot slot) { return entries_[slot].queue; }
  std::uint64_t& slot_key(Slot slot) { return entries_[slot].key; }

  /// Issue the queued request in `head`, which the algorithm has already dropped from its own
  /// structures, merging contiguous queued requests into it (docs: "Aggregation"); merged parts
  /// are reported with `on_merged`. Appends the dispatch to `out` and frees the slots.
  void issue(Slot head, Batch& out, std::uint32_t tag = 0);

  /// Intrusive doubly-linked list over slots (one list per slot at a time), for arrival-order
  /// queues with O(1) removal of merged parts.
  struct SlotList {
    Slot head = kNone;
    Slot tail = kNone;
    std::size_t size = 0;
    bool empty() const { return size == 0; }
  };
  void list_push_back(SlotList& list, Slot slot);
  void list_remove(SlotList& list, Slot slot);

 private:
  struct Entry {
    Request request;
    std::uint64_t seq = 0;
    Slot prev = kNone, next = kNone;              // SlotList links
    Slot start_prev = kNone, start_next = kNone;  // chain of requests starting at one offset
    Slot end_prev = kNone, end_next = kNone;      // chain of requests ending at one offset
    std::uint32_t queue = 0;                      // algorithm-owned
    std::uint64_t key = 0;                        // algorithm-owned
    bool queued = false;
  };
  /// (file, op, scope, position): requests starting, or ending, at `position`.
  struct PositionKey {
    FileHandle file;
    std::uint64_t position;
    std::uint64_t kind;  // op and scope
    bool operator==(const PositionKey&) const = default;
  };
  struct IdHash {
    std::uint64_t operator()(RequestId id) const { return mix64(id); }
  };
  /// Oldest and newest request of one chain (chains are in enqueue order).
  struct Chain {
    Slot head = kNone;
    Slot tail = kNone;
  };
  /// Open addressing (linear probing, backward-shift deletion) from a key's 64-bit hash to the
  /// chain of queued requests with that key. A cell keeps only the hash; its key is checked on the
  /// chain's head request, so different keys with equal hashes are still told apart. Small cells
  /// keep the table in cache, which is most of the cost of an enqueue.
  struct PositionCell {
    std::uint64_t hash = 0;
    Chain chain;  ///< empty (head == kNone): free cell
  };
  struct PositionTable {
    std::vector<PositionCell> cells = std::vector<PositionCell>(16);
    std::size_t size = 0;
  };
  enum class Side { Start, End };
  static constexpr std::size_t kNoCell = std::numeric_limits<std::size_t>::max();
  struct InFlight {
    std::uint32_t remaining = 0;
    std::uint32_t tag = 0;
    Time latency = 0;
  };

  bool aggregates() const { return limits_.max_requests > 1; }
  PositionKey key(const Request& r, std::uint64_t position) const;
  PositionKey key(Slot slot, Side side) const;
  static std::uint64_t hash(const PositionKey& k);
  std::size_t table_find(const PositionTable& t, const PositionKey& k, std::uint64_t h,
                         Side side) const;
  void table_add(PositionTable& t, Slot slot, Side side);
  void table_remove(PositionTable& t, Slot slot, Side side);
  static void table_grow(PositionTable& t);
  void index_add(Slot slot);
  void index_remove(Slot slot);
  /// Oldest queued request with key `k` (starting or ending there, by `side`), or kNone.
  Slot index_find(const PositionKey& k, Side side) const;

  std::string name_;
  AggregationLimits limits_;
  Scope scope_;
  std::vector<Entry> entries_;
  std::vector<Slot> free_slots_;
  PositionTable starts_, ends_;
  /// Every queued or in-flight id: kQueued, or its dispatch's index in `in_flight_`.
  FlatMap<RequestId, std::uint32_t, IdHash> live_;
  static constexpr std::uint32_t kQueued = std::numeric_limits<std::uint32_t>::max();
  std::vector<InFlight> in_flight_;
  std::vector<std::uint32_t> free_in_flight_;
  std::size_t queued_ = 0;
  std::uint64_t next_seq_ = 0;
  Time clock_ = 0;
};

}  // namespace harmonia::core::requests
