// HBRR, handle-based round-robin (Ohta et al., "Optimization techniques at the I/O forwarding
// layer", CLUSTER 2010, one of the TWINS dissertation's baselines): one queue per file handle,
// reads and writes together, in arrival order. Handles with queued requests take turns in a
// round-robin ring (a handle joins at the tail when it gets its first queued request); at its turn
// a handle issues up to `hbrr.batch` requests, oldest first, each merged with the queued requests
// of the same handle and operation that are contiguous to it.
#include <deque>
#include <vector>

#include "core/requests/queue_numbers.hpp"
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class Hbrr : public RequestScheduler {
 public:
  Hbrr(AggregationLimits limits, std::uint64_t batch)
      : RequestScheduler("hbrr", limits), batch_(batch) {}

 protected:
  void on_enqueue(Slot slot) override {
    bool created = false;
    const std::uint32_t q = numbers_.of(request(slot).file, Op::Read, created);
    if (created) handles_.emplace_back();
    slot_queue(slot) = q;
    if (handles_[q].empty()) ring_.push_back(q);
    list_push_back(handles_[q], slot);
  }

  void on_merged(Slot slot) override { list_remove(handles_[slot_queue(slot)], slot); }

  void on_dequeue(Time now, Batch& out) override {
    if (!ring_.empty()) {
      const std::uint32_t q = ring_.front();
      ring_.pop_front();
      SlotList& handle = handles_[q];
      for (std::uint64_t k = 0; k < batch_ && !handle.empty(); ++k) {
        const Slot head = handle.head;
        list_remove(handle, head);
        issue(head, out);
      }
      if (!handle.empty()) ring_.push_back(q);
    }
    out.retry_at = queued() > 0 ? now : kNever;
  }

 private:
  std::uint64_t batch_;
  QueueNumbers numbers_;
  std::vector<SlotList> handles_;
  std::deque<std::uint32_t> ring_;  ///< handles with queued requests, next turn first
};

}  // namespace

std::unique_ptr<RequestScheduler> make_hbrr(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  const std::uint64_t batch = options.get_uint("batch", 1, 1, 1u << 20);
  return std::make_unique<Hbrr>(limits, batch);
}

}  // namespace harmonia::core::requests
