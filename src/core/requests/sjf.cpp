// SJF, shortest job first (AGIOS' variant with aggregation): one queue per file and operation,
// in offset order. Each dequeue picks the queue with the fewest queued bytes (ties: the queue
// created first) and issues its lowest-offset request merged with the contiguous requests that
// follow it. Not starvation-free: a large queue waits while smaller ones keep arriving.
#include <set>
#include <tuple>
#include <vector>

#include "core/requests/queue_numbers.hpp"
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class Sjf : public RequestScheduler {
 public:
  explicit Sjf(AggregationLimits limits) : RequestScheduler("sjf", limits) {}

 protected:
  void on_enqueue(Slot slot) override {
    const Request& r = request(slot);
    bool created = false;
    const std::uint32_t q = numbers_.of(r.file, r.op, created);
    if (created) queues_.emplace_back();
    slot_queue(slot) = q;
    Queue& queue = queues_[q];
    if (!queue.items.empty()) by_size_.erase({queue.bytes, q});
    queue.items.insert({r.offset, seq(slot), slot});
    queue.bytes += r.length;
    by_size_.insert({queue.bytes, q});
  }

  void on_merged(Slot slot) override { remove(slot); }

  void on_dequeue(Time now, Batch& out) override {
    if (!by_size_.empty()) {
      const Queue& queue = queues_[by_size_.begin()->second];
      const Slot head = std::get<2>(*queue.items.begin());
      remove(head);
      issue(head, out);
    }
    out.retry_at = queued() > 0 ? now : kNever;
  }

 private:
  struct Queue {
    std::set<std::tuple<std::uint64_t, std::uint64_t, Slot>> items;  ///< (offset, seq, slot)
    std::uint64_t bytes = 0;
  };

  void remove(Slot slot) {
    const std::uint32_t q = slot_queue(slot);
    Queue& queue = queues_[q];
    const Request& r = request(slot);
    by_size_.erase({queue.bytes, q});
    queue.items.erase({r.offset, seq(slot), slot});
    queue.bytes -= r.length;
    if (!queue.items.empty()) by_size_.insert({queue.bytes, q});
  }

  QueueNumbers numbers_;
  std::vector<Queue> queues_;
  std::set<std::pair<std::uint64_t, std::uint32_t>> by_size_;  ///< (queued bytes, queue)
};

}  // namespace

std::unique_ptr<RequestScheduler> make_sjf(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  return std::make_unique<Sjf>(limits);
}

}  // namespace harmonia::core::requests
