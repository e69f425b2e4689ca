// SW, static windows (AGIOS' SW, formerly TW): time is cut into fixed windows of `sw.window_us`
// starting at time 0. Requests are served window by window in arrival-time order of windows, and
// inside a window application by application (lowest id first), each application's requests in
// arrival order: the order is (floor(arrival / window), application, arrival). One request per
// dequeue, no aggregation (as in AGIOS, whose SW uses the plain timeline).
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class StaticWindows : public RequestScheduler {
 public:
  explicit StaticWindows(Time window)
      : RequestScheduler("sw", AggregationLimits{}), window_(window) {}

 protected:
  void on_enqueue(Slot slot) override {
    const Request& r = request(slot);
    heap_.push({static_cast<std::uint64_t>(r.arrival / window_), r.app, seq(slot), slot});
  }
  void on_merged(Slot) override {}  // never aggregates

  void on_dequeue(Time now, Batch& out) override {
    if (!heap_.empty()) {
      const Slot head = std::get<3>(heap_.top());
      heap_.pop();
      issue(head, out);
    }
    out.retry_at = heap_.empty() ? kNever : now;
  }

 private:
  using Key = std::tuple<std::uint64_t, AppId, std::uint64_t, Slot>;  // window, app, seq, slot
  Time window_;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> heap_;
};

}  // namespace

std::unique_ptr<RequestScheduler> make_sw(OptionReader& options) {
  const auto window = static_cast<Time>(
      options.get_uint("window_us", 1'000'000, 1, std::uint64_t{1} << 40) * kMicrosecond);
  return std::make_unique<StaticWindows>(window);
}

}  // namespace harmonia::core::requests
