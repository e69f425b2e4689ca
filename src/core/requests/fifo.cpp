// FIFO: the forwarding node's default without a scheduler (IOFSL's FIFO in the TWINS
// dissertation, AGIOS' NOOP): every dequeue issues everything queued, alone, in arrival order.
// It is also the pass-through implementation that tests use as a reference.
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class Fifo : public RequestScheduler {
 public:
  Fifo() : RequestScheduler("fifo", AggregationLimits{}) {}

 protected:
  void on_enqueue(Slot slot) override { list_push_back(queue_, slot); }
  void on_merged(Slot) override {}  // never aggregates

  void on_dequeue(Time, Batch& out) override {
    out.dispatches.reserve(queue_.size);
    while (!queue_.empty()) {
      const Slot head = queue_.head;
      list_remove(queue_, head);
      issue(head, out);
    }
    out.retry_at = kNever;
  }

 private:
  SlotList queue_;
};

}  // namespace

std::unique_ptr<RequestScheduler> make_fifo(OptionReader& /*options: none*/) {
  return std::make_unique<Fifo>();
}

}  // namespace harmonia::core::requests
