// aIOLi (Lebre et al., CLUSTER 2006, as adapted in AGIOS): quantum-based and synchronous.
// One queue per file and operation, in offset order; a queue's head is its lowest-offset request.
// - Byte quanta: every selection is a round that gives each queued request `aioli.quantum_bytes`
//   more quantum; a head may be selected once its quantum covers its length. Among eligible
//   heads, the oldest goes first (FCFS between queues). Rounds in which no head would be eligible
//   are skipped at once.
// - Time quanta: the selected queue keeps the scheduler while the latencies of what it issued in
//   this turn add up to less than its time quantum (initially `aioli.time_quantum_us`), issuing
//   its head each time. When the turn ends (quantum used up or queue empty), the quantum is
//   adapted to its use as AGIOS does: used >= 175 % doubles it, >= 125 % multiplies it by 1.5,
//   < 75 % halves it, within [initial / 16, initial * 16].
// - Synchronous: nothing is issued while a dispatch is in flight; its release resumes.
// AGIOS' extra waits (shift phenomenon, expected better aggregation) are left out: they rely on
// its prediction module.
#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "core/requests/queue_numbers.hpp"
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

namespace {

class Aioli : public RequestScheduler {
 public:
  Aioli(AggregationLimits limits, std::uint64_t quantum_bytes, Time time_quantum)
      : RequestScheduler("aioli", limits),
        quantum_bytes_(quantum_bytes),
        initial_(time_quantum),
        min_(std::max<Time>(1, time_quantum / 16)),
        max_(time_quantum * 16) {}

 protected:
  void on_enqueue(Slot slot) override {
    const Request& r = request(slot);
    bool created = false;
    const std::uint32_t q = numbers_.of(r.file, r.op, created);
    if (created) queues_.push_back({{}, initial_, Place::None, 0});
    slot_queue(slot) = q;
    slot_key(slot) = round_ + (r.length - 1) / quantum_bytes_ + 1;  // round making it eligible
    Queue& queue = queues_[q];
    const bool new_head = queue.items.empty() || r.offset < std::get<0>(*queue.items.begin());
    queue.items.insert({r.offset, seq(slot), slot});
    if (new_head) place(q);
  }

  void on_merged(Slot slot) override { remove(slot); }

  void on_completed(std::uint32_t, Time latency) override {
    waiting_ = false;
    used_ += latency;
  }

  void on_dequeue(Time, Batch& out) override {
    out.retry_at = kNever;  // next: a release, or a new request
    if (waiting_) return;
    if (current_ != kNoQueue) {
      Queue& queue = queues_[current_];
      if (used_ < queue.quantum && !queue.items.empty()) return issue_head(current_, out);
      adapt(queue);
      current_ = kNoQueue;
    }
    if (queued() == 0) return;
    // A new round: every request gains a byte quantum; skip to the first round with an
    // eligible head if there is none yet.
    ++round_;
    if (ready_.empty()) round_ = std::max(round_, std::get<0>(*not_ready_.begin()));
    while (!not_ready_.empty() && std::get<0>(*not_ready_.begin()) <= round_) {
      const std::uint32_t q = std::get<1>(*not_ready_.begin());
      not_ready_.erase(not_ready_.begin());
      queues_[q].place = Place::None;
      place(q);
    }
    current_ = ready_.begin()->second;
    used_ = 0;
    issue_head(current_, out);
  }

 private:
  static constexpr std::uint32_t kNoQueue = UINT32_MAX;
  enum class Place { None, NotReady, Ready };
  struct Queue {
    std::set<std::tuple<std::uint64_t, std::uint64_t, Slot>> items;  ///< (offset, seq, slot)
    Time quantum = 0;
    Place place = Place::None;
    std::uint64_t place_key = 0;  ///< its key in ready_ or not_ready_
  };

  void issue_head(std::uint32_t q, Batch& out) {
    const Slot head = std::get<2>(*queues_[q].items.begin());
    remove(head);
    issue(head, out, q);
    waiting_ = true;
  }

  void remove(Slot slot) {
    const std::uint32_t q = slot_queue(slot);
    Queue& queue = queues_[q];
    const bool was_head = std::get<2>(*queue.items.begin()) == slot;
    queue.items.erase({request(slot).offset, seq(slot), slot});
    if (was_head) place(q);
  }

  /// (Re)file queue q under its current head: eligible heads by age, the others by the round at
  /// which they become eligible.
  void place(std::uint32_t q) {
    Queue& queue = queues_[q];
    if (queue.place == Place::Ready) ready_.erase({queue.place_key, q});
    if (queue.place == Place::NotReady) not_ready_.erase({queue.place_key, q});
    queue.place = Place::None;
    if (queue.items.empty()) return;
    const Slot head = std::get<2>(*queue.items.begin());
    if (slot_key(head) <= round_) {
      queue.place = Place::Ready;
      queue.place_key = seq(head);
      ready_.insert({queue.place_key, q});
    } else {
      queue.place = Place::NotReady;
      queue.place_key = slot_key(head);
      not_ready_.insert({queue.place_key, q});
    }
  }

  void adapt(Queue& queue) {
    const Time q = queue.quantum;
    if (used_ * 4 >= q * 7)
      queue.quantum = q * 2;
    else if (used_ * 4 >= q * 5)
      queue.quantum = q + q / 2;
    else if (used_ * 4 < q * 3)
      queue.quantum = q / 2;
    queue.quantum = std::clamp(queue.quantum, min_, max_);
  }

  std::uint64_t quantum_bytes_;
  Time initial_, min_, max_;
  QueueNumbers numbers_;
  std::vector<Queue> queues_;
  std::set<std::pair<std::uint64_t, std::uint32_t>> ready_;      ///< (head seq, queue)
  std::set<std::pair<std::uint64_t, std::uint32_t>> not_ready_;  ///< (eligible round, queue)
  std::uint64_t round_ = 0;
  std::uint32_t current_ = kNoQueue;  ///< queue holding the scheduler
  Time used_ = 0;                     ///< latency its dispatches took in this turn
  bool waiting_ = false;              ///< a dispatch is in flight
};

}  // namespace

std::unique_ptr<RequestScheduler> make_aioli(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  const std::uint64_t quantum_bytes = options.get_uint("quantum_bytes", 65536, 1);
  const auto time_quantum = static_cast<Time>(
      options.get_uint("time_quantum_us", 1000, 1, std::uint64_t{1} << 32) * kMicrosecond);
  return std::make_unique<Aioli>(limits, quantum_bytes, time_quantum);
}

}  // namespace harmonia::core::requests
