// MLF, multilevel feedback (AGIOS' variant of aIOLi without its synchronous waits): one queue per
// file and operation, in offset order; files with queued requests are visited in a round-robin
// ring. A visit to a file raises the quantum of every queued request of its read queue by
// `mlf.quantum_bytes` and selects the lowest-offset read whose quantum covers its length; if none,
// it does the same with the write queue. Each dequeue visits files until one selects a request,
// and issues it merged with the contiguous requests of its queue.
//
// Quanta are counted in visits, not stored per request: a queue counts its visits V, and a
// request queued at V = v0 becomes eligible at visit v0 + ceil(length / quantum). Rounds where no
// file could select anything are skipped in one step; they only add one visit to every queue.
// A queue's two orders are binary heaps from which merged requests are deleted lazily (an entry
// is stale once its slot no longer holds the same queued request).
#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include "core/requests/queue_numbers.hpp"
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class Mlf : public RequestScheduler {
 public:
  Mlf(AggregationLimits limits, std::uint64_t quantum)
      : RequestScheduler("mlf", limits), quantum_(quantum) {}

 protected:
  void on_enqueue(Slot slot) override {
    const Request& r = request(slot);
    bool created = false;
    const std::uint32_t f = files_numbers_.of(r.file, Op::Read, created);
    if (created) files_.push_back({static_cast<std::uint32_t>(queues_.size())});
    if (created) queues_.resize(queues_.size() + 2);  // reads, then writes
    File& file = files_[f];
    const std::uint32_t q = file.first_queue + (r.op == Op::Write ? 1 : 0);
    Queue& queue = queues_[q];
    slot_queue(slot) = q;
    slot_key(slot) = queue.visits + (r.length - 1) / quantum_ + 1;  // visit making it eligible
    push(queue.pending, {slot_key(slot), seq(slot), slot});
    ++queue.count;
    if (file.queued++ == 0) ring_.push_back(f);
  }

  void on_merged(Slot slot) override { remove(slot); }

  void on_dequeue(Time now, Batch& out) override {
    std::size_t failed = 0;  // consecutive visits that selected nothing
    while (!ring_.empty()) {
      if (failed == ring_.size()) {
        skip_rounds();
        failed = 0;
      }
      const std::uint32_t f = ring_.front();
      ring_.pop_front();
      const Slot head = visit(files_[f]);
      if (head == kNone) {
        ring_.push_back(f);
        ++failed;
        continue;
      }
      remove(head);
      issue(head, out);
      if (files_[f].queued > 0) ring_.push_back(f);
      break;
    }
    out.retry_at = queued() > 0 ? now : kNever;
  }

 private:
  using Key = std::tuple<std::uint64_t, std::uint64_t, Slot>;
  using Heap = std::vector<Key>;  ///< min-heap
  struct Queue {
    std::uint64_t visits = 0;
    std::size_t count = 0;  ///< queued requests
    Heap pending;           ///< (eligible at visit, seq, slot): quantum still too small
    Heap eligible;          ///< (offset, seq, slot)
  };
  struct File {
    std::uint32_t first_queue = 0;  ///< its read queue; the write queue follows
    std::size_t queued = 0;
  };

  static void push(Heap& heap, const Key& key) {
    heap.push_back(key);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
  static void pop(Heap& heap) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.pop_back();
  }
  /// Drops stale entries from the top: the top, if any, is then a queued request.
  void clean(Heap& heap) const {
    while (!heap.empty()) {
      const auto& [k, s, slot] = heap.front();
      if (is_queued(slot) && seq(slot) == s) return;
      pop(heap);
    }
  }

  /// One visit to a queue: a quantum more for each of its requests; the lowest-offset eligible.
  Slot visit(Queue& queue) {
    if (queue.count == 0) return kNone;
    ++queue.visits;
    for (clean(queue.pending);
         !queue.pending.empty() && std::get<0>(queue.pending.front()) <= queue.visits;
         clean(queue.pending)) {
      const Slot s = std::get<2>(queue.pending.front());
      pop(queue.pending);
      push(queue.eligible, {request(s).offset, seq(s), s});
    }
    clean(queue.eligible);
    return queue.eligible.empty() ? kNone : std::get<2>(queue.eligible.front());
  }

  Slot visit(const File& file) {
    const Slot read = visit(queues_[file.first_queue]);
    return read != kNone ? read : visit(queues_[file.first_queue + 1]);
  }

  /// After a whole round without selection, every queue has only pending requests and each round
  /// adds one visit to every non-empty queue: add the rounds that would still select nothing.
  void skip_rounds() {
    std::uint64_t rounds = std::numeric_limits<std::uint64_t>::max();
    for (std::uint32_t f : ring_)
      for (std::uint32_t q = files_[f].first_queue; q < files_[f].first_queue + 2; ++q) {
        Queue& queue = queues_[q];
        if (queue.count == 0) continue;
        clean(queue.pending);  // its eligible heap was found empty in this round
        rounds = std::min(rounds, std::get<0>(queue.pending.front()) - queue.visits);
      }
    for (std::uint32_t f : ring_)
      for (std::uint32_t q = files_[f].first_queue; q < files_[f].first_queue + 2; ++q)
        if (queues_[q].count > 0) queues_[q].visits += rounds - 1;
  }

  /// The request leaves its queue; its heap entry goes stale once the slot is issued.
  void remove(Slot slot) {
    Queue& queue = queues_[slot_queue(slot)];
    if (--queue.count == 0) {
      queue.pending.clear();
      queue.eligible.clear();
    }
    --files_[slot_queue(slot) / 2].queued;
  }

  std::uint64_t quantum_;
  QueueNumbers files_numbers_;
  std::vector<File> files_;
  std::vector<Queue> queues_;
  std::deque<std::uint32_t> ring_;  ///< files with queued requests, next visit first
};

}  // namespace

std::unique_ptr<RequestScheduler> make_mlf(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  const std::uint64_t quantum = options.get_uint("quantum_bytes", 8192, 1);
  return std::make_unique<Mlf>(limits, quantum);
}

}  // namespace harmonia::core::requests
