// TO, time order (AGIOS' "timeorder"): one queue in arrival order; each dequeue issues the oldest
// request. With aggregation limits above one request this is also `to-agg` (to_agg.cpp), as in
// AGIOS, where TO-agg is timeorder with a maximum aggregation size above one.
#include <utility>

#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class TimeOrder : public RequestScheduler {
 public:
  TimeOrder(std::string name, AggregationLimits limits)
      : RequestScheduler(std::move(name), limits) {}

 protected:
  void on_enqueue(Slot slot) override { list_push_back(queue_, slot); }
  void on_merged(Slot slot) override { list_remove(queue_, slot); }

  void on_dequeue(Time now, Batch& out) override {
    if (!queue_.empty()) {
      const Slot head = queue_.head;
      list_remove(queue_, head);
      issue(head, out);
    }
    out.retry_at = queue_.empty() ? kNever : now;
  }

 private:
  SlotList queue_;
};

}  // namespace

std::unique_ptr<RequestScheduler> make_time_order(std::string name, AggregationLimits limits) {
  return std::make_unique<TimeOrder>(std::move(name), limits);
}

std::unique_ptr<RequestScheduler> make_to(OptionReader& /*options: none*/) {
  return make_time_order("to", AggregationLimits{});
}

}  // namespace harmonia::core::requests
