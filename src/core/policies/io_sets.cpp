// IO-Sets with the Set-10 mapping (Boito, Pallez, Teylo, Vidal, "IO-SETS: Simple and efficient
// approaches for I/O bandwidth management", IEEE TPDS 2023). Applications are grouped into sets
// by the order of magnitude of their characteristic time w (the length of one compute + I/O
// iteration): set i holds the applications with 10^i <= w < 10^(i+1). Inside a set, one
// application does I/O at a time, first come first served; the sets run side by side and share
// the bandwidth, set i weighted 10^-i, so a set of shorter iterations gets the larger share.
//
// On burst buffers a share of the bandwidth is a share of the buffers: when a set's turn comes,
// its phase is striped over its weighted share of the buffers (at least Y) among those no phase
// runs on. Phases are not preempted, so a set that started alone keeps its buffers until its
// phase ends. w is not declared: each application's is estimated as it runs, as the mean over its
// phases so far of (compute before the phase + the phase's I/O time alone on every buffer).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/optimizer.hpp"
#include "core/policies/policies.hpp"
#include "core/policies/shares.hpp"

namespace harmonia::core {

int io_set_of(double characteristic_time) {
  return static_cast<int>(std::floor(std::log10(std::max(characteristic_time, 1e-6))));
}

namespace {

class IoSets : public Scheduler {
 public:
  using Scheduler::Scheduler;

 protected:
  void admit_on_register(AppId app, double now) override {
    // IO-Sets admits every job at once; on a machine the jobs share they queue for nodes.
    if (config_.compute_nodes > 0)
      Scheduler::admit_on_register(app, now);
    else
      admit(app, now);
  }

  void decide(double now) override {
    for (const auto& p : pending_) observe(p);
    // Sets with I/O in progress run no other phase (exclusive inside a set).
    std::map<int, bool> busy;  // active sets, ordered by index (shorter iterations first)
    for (const auto& r : running_) busy[set_of(r.request.app)] = true;
    std::map<int, const PendingPhase*> heads;
    for (const auto& p : pending_) {
      const int set = set_of(p.request.app);
      busy.try_emplace(set, false);
      if (busy[set]) continue;
      const auto* head = heads[set];
      if (!head || std::tie(p.requested, p.request.app, p.request.index) <
                       std::tie(head->requested, head->request.app, head->request.index))
        heads[set] = &p;
    }
    if (heads.empty()) return;

    // Set-10 priorities: set i weighs 10^-i, relative to the shortest active set.
    const int shortest = busy.begin()->first;
    std::vector<double> weights;
    std::map<int, size_t> slot;
    for (const auto& [set, running] : busy) {
      slot[set] = weights.size();
      weights.push_back(std::pow(10.0, -(set - shortest)));
    }
    const auto shares = apportion(weights, config_.buffer_count, config_.min_buffers);

    std::vector<PhaseRequest> chosen;
    std::vector<std::vector<BufferId>> where;
    std::vector<bool> taken(buffers_.size(), false);
    for (const auto& [set, head] : heads) {  // higher priority first
      std::vector<bool> ok(buffers_.size());
      for (BufferId b = 0; b < config_.buffer_count; ++b)
        ok[static_cast<size_t>(b)] =
            !taken[static_cast<size_t>(b)] && placeable(b, head->request.app);
      const auto idle = idle_buffers(buffers_, ok);
      const int k = std::min(shares[slot[set]], static_cast<int>(idle.size()));
      if (k < config_.min_buffers) continue;
      std::vector<BufferId> bufs(idle.begin(), idle.begin() + k);
      if (!fits_on(buffers_, bufs, head->request.bytes)) {
        capacity_blocked_ = true;
        continue;
      }
      std::sort(bufs.begin(), bufs.end());
      for (BufferId b : bufs) taken[static_cast<size_t>(b)] = true;
      chosen.push_back(head->request);
      where.push_back(std::move(bufs));
    }
    for (size_t i = 0; i < chosen.size(); ++i) grant(chosen[i].app, chosen[i].index, where[i], now);
  }

 private:
  struct Estimate {
    double total = 0;
    int samples = 0;
  };

  /// Adds one iteration sample the first time a phase is seen pending.
  void observe(const PendingPhase& p) {
    // An application has one phase pending at a time: a new index is a new iteration.
    const auto [last, first_time] = observed_.try_emplace(p.request.app, p.request.index);
    if (!first_time && last->second == p.request.index) return;
    last->second = p.request.index;
    // The phase before it ended when the application went back to computing.
    double since = apps_[static_cast<size_t>(p.request.app)].admitted_at;
    const auto& records = recorder().phases();
    const auto& mine = recorder().phases_of(p.request.app);
    for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
      const auto& record = records[*it];
      if (record.index != p.request.index && record.end >= 0) {
        since = record.end;
        break;
      }
    }
    const Candidate alone{
        p.request.bytes, p.request.op, 0,
        apps_[static_cast<size_t>(p.request.app)].info.nodes * config_.client_node_bw};
    const std::vector<BufferSlot> all(static_cast<size_t>(config_.buffer_count));
    const double io_alone =
        predict(alone, 1, all, config_.buffer_device, config_.buffer_link_bw).io_alone;
    auto& e = estimates_[p.request.app];
    e.total += std::max(0.0, p.requested - since) + io_alone;
    e.samples += 1;
  }

  int set_of(AppId app) const {
    const auto it = estimates_.find(app);
    return io_set_of(it->second.total / it->second.samples);
  }

  std::map<AppId, Estimate> estimates_;
  std::map<AppId, int> observed_;  ///< index of the phase each application was last seen with
};

}  // namespace

std::unique_ptr<Scheduler> make_io_sets(SchedulerConfig config, Actions& actions) {
  return std::make_unique<IoSets>(std::move(config), actions);
}

}  // namespace harmonia::core
