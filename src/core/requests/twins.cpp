// TWINS, server time windows (Bez et al., PDP 2017; the TWINS dissertation, section 2): one queue
// per data server, in arrival order. Time is cut into windows of `twins.window_us` aligned on
// time 0; during window w, forwarding node `twins.node` serves only server P_node[w mod S], where
// P_node is its permutation of the `twins.servers` (S) servers, the rotation starting at server
// node mod S. The rotations form a Latin square: with no more nodes than servers, no two nodes
// serve the same server in the same window. Each dequeue issues the oldest request of the
// window's server merged with the contiguous requests queued for the same server; when that
// queue is empty the node waits for the next window whose server has requests (TWINS is not
// work-conserving).
#include <stdexcept>
#include <string>
#include <vector>

#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

std::vector<ServerId> twins_permutation(int node, int servers) {
  if (node < 0 || servers < 1) throw std::invalid_argument("twins: node >= 0 and servers >= 1");
  std::vector<ServerId> order(static_cast<std::size_t>(servers));
  for (int i = 0; i < servers; ++i) order[static_cast<std::size_t>(i)] = (node + i) % servers;
  return order;
}

ServerId twins_server(int node, int servers, std::uint64_t window) {
  if (node < 0 || servers < 1) throw std::invalid_argument("twins: node >= 0 and servers >= 1");
  const auto s = static_cast<std::uint64_t>(servers);
  return static_cast<ServerId>((static_cast<std::uint64_t>(node) % s + window % s) % s);
}

namespace {

class Twins : public RequestScheduler {
 public:
  Twins(AggregationLimits limits, int node, int servers, Time window)
      : RequestScheduler("twins", limits, Scope::SameServer),
        node_(node),
        window_(window),
        queues_(static_cast<std::size_t>(servers)) {}

 protected:
  void on_enqueue(Slot slot) override {
    const Request& r = request(slot);
    if (static_cast<std::size_t>(r.server) >= queues_.size())
      throw std::invalid_argument("twins: request " + std::to_string(r.id) + " targets server " +
                                  std::to_string(r.server) +
                                  ", but twins.servers = " + std::to_string(queues_.size()));
    list_push_back(queues_[static_cast<std::size_t>(r.server)], slot);
  }

  void on_merged(Slot slot) override {
    list_remove(queues_[static_cast<std::size_t>(request(slot).server)], slot);
  }

  void on_dequeue(Time now, Batch& out) override {
    const auto window = static_cast<std::uint64_t>(now / window_);
    SlotList& queue = queues_[static_cast<std::size_t>(server(window))];
    if (!queue.empty()) {
      const Slot head = queue.head;
      list_remove(queue, head);
      issue(head, out);
    }
    out.retry_at = !queue.empty() ? now : next_window_with_requests(window);
  }

 private:
  int servers() const { return static_cast<int>(queues_.size()); }
  ServerId server(std::uint64_t window) const { return twins_server(node_, servers(), window); }

  Time next_window_with_requests(std::uint64_t window) const {
    if (queued() == 0) return kNever;
    for (std::uint64_t w = window + 1;; ++w)
      if (!queues_[static_cast<std::size_t>(server(w))].empty())
        return static_cast<Time>(w) * window_;
  }

  int node_;
  Time window_;
  std::vector<SlotList> queues_;  ///< per data server
};

}  // namespace

std::unique_ptr<RequestScheduler> make_twins(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  const auto servers = static_cast<int>(options.require_uint("servers", 1, 1u << 20));
  const auto node = static_cast<int>(options.get_uint("node", 0, 0, 1u << 30));
  const auto window = static_cast<Time>(
      options.get_uint("window_us", 1000, 1, std::uint64_t{1} << 40) * kMicrosecond);
  return std::make_unique<Twins>(limits, node, servers, window);
}

}  // namespace harmonia::core::requests
