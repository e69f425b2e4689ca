#include "core/requests/request_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace harmonia::core::requests {

Time from_seconds(double seconds) { return static_cast<Time>(std::llround(seconds * 1e9)); }
double to_seconds(Time time) { return static_cast<double>(time) * 1e-9; }

RequestScheduler::RequestScheduler(std::string name, AggregationLimits limits, Scope scope)
    : name_(std::move(name)), limits_(limits), scope_(scope) {
  if (limits_.max_requests < 1 || limits_.max_bytes < 1)
    throw std::invalid_argument(name_ + ": aggregation limits must be >= 1");
}

RequestScheduler::PositionKey RequestScheduler::key(const Request& r,
                                                    std::uint64_t position) const {
  std::uint64_t kind = r.op == Op::Write ? 1 : 0;
  if (scope_ == Scope::SameServer) kind |= static_cast<std::uint64_t>(r.server) << 1;
  return {r.file, position, kind};
}

RequestScheduler::PositionKey RequestScheduler::key(Slot slot, Side side) const {
  const Request& r = entries_[slot].request;
  return key(r, side == Side::Start ? r.offset : r.offset + r.length);
}

std::uint64_t RequestScheduler::hash(const PositionKey& k) {
  return mix64(k.position ^ mix64(k.file ^ mix64(k.kind)));
}

void RequestScheduler::enqueue(const Request& r) {
  if (r.length == 0) throw std::invalid_argument("request " + std::to_string(r.id) + ": length 0");
  if (r.offset > std::numeric_limits<std::uint64_t>::max() - r.length)
    throw std::invalid_argument("request " + std::to_string(r.id) + ": offset + length overflows");
  if (r.server < 0)
    throw std::invalid_argument("request " + std::to_string(r.id) + ": negative server");
  if (r.arrival < clock_)
    throw std::invalid_argument("request " + std::to_string(r.id) +
                                ": arrival before the scheduler's clock (time went backwards)");
  bool inserted = false;
  live_.try_emplace(r.id, kQueued, inserted);
  if (!inserted)
    throw std::invalid_argument("request " + std::to_string(r.id) +
                                ": id already queued or in flight");
  Slot slot;
  if (free_slots_.empty()) {
    slot = static_cast<Slot>(entries_.size());
    entries_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  entries_[slot] = Entry{r, next_seq_};
  entries_[slot].queued = true;
  try {
    on_enqueue(slot);  // may reject the request (e.g. a server TWINS does not know)
  } catch (...) {
    entries_[slot].queued = false;
    free_slots_.push_back(slot);
    live_.erase(r.id);
    throw;
  }
  ++next_seq_;
  ++queued_;
  clock_ = r.arrival;
  if (aggregates()) index_add(slot);
}

Batch RequestScheduler::dequeue(Time now) {
  if (now < clock_)
    throw std::invalid_argument(name_ + ": dequeue time before the scheduler's clock");
  clock_ = now;
  Batch out;
  on_dequeue(now, out);
  return out;
}

void RequestScheduler::release(RequestId id, Time latency) {
  if (latency < 0) throw std::invalid_argument("release: negative latency");
  const std::uint32_t* found = live_.find(id);
  if (found == nullptr || *found == kQueued)
    throw std::logic_error("release of request " + std::to_string(id) + ", which is not in flight");
  const std::uint32_t index = *found;
  live_.erase(id);
  InFlight& d = in_flight_[index];
  d.latency = std::max(d.latency, latency);
  if (--d.remaining > 0) return;
  free_in_flight_.push_back(index);
  on_completed(d.tag, d.latency);
}

void RequestScheduler::issue(Slot head, Batch& out, std::uint32_t tag) {
  const Request& h = entries_[head].request;
  std::uint64_t lo = h.offset, hi = h.offset + h.length, bytes = h.length;
  std::vector<Slot> before, after;  // merged parts below and above the head
  if (aggregates()) {
    index_remove(head);
    std::size_t count = 1;
    auto fits = [&](Slot s) {
      return s != kNone && count < limits_.max_requests && bytes <= limits_.max_bytes &&
             entries_[s].request.length <= limits_.max_bytes - bytes;
    };
    auto take = [&](Slot s) {
      index_remove(s);
      on_merged(s);
      bytes += entries_[s].request.length;
      ++count;
    };
    while (true) {
      if (const Slot s = index_find(key(h, hi), Side::Start); fits(s)) {
        take(s);
        hi += entries_[s].request.length;
        after.push_back(s);
      } else if (const Slot p = index_find(key(h, lo), Side::End); fits(p)) {
        take(p);
        lo -= entries_[p].request.length;
        before.push_back(p);
      } else {
        break;
      }
    }
  }

  std::uint32_t record;
  if (free_in_flight_.empty()) {
    record = static_cast<std::uint32_t>(in_flight_.size());
    in_flight_.emplace_back();
  } else {
    record = free_in_flight_.back();
    free_in_flight_.pop_back();
  }
  const std::size_t parts = 1 + before.size() + after.size();
  in_flight_[record] = {static_cast<std::uint32_t>(parts), tag, 0};

  Dispatch& d = out.dispatches.emplace_back();
  d.file = h.file;
  d.op = h.op;
  d.offset = lo;
  d.length = hi - lo;
  d.parts.reserve(parts);
  auto move_out = [&](Slot s) {
    Request& r = entries_[s].request;
    entries_[s].queued = false;
    *live_.find(r.id) = record;
    d.parts.push_back(r);
    free_slots_.push_back(s);
  };
  for (auto it = before.rbegin(); it != before.rend(); ++it) move_out(*it);
  move_out(head);
  for (Slot s : after) move_out(s);
  d.server = d.parts.front().server;
  queued_ -= parts;
}

void RequestScheduler::list_push_back(SlotList& list, Slot slot) {
  Entry& e = entries_[slot];
  e.prev = list.tail;
  e.next = kNone;
  if (list.tail == kNone)
    list.head = slot;
  else
    entries_[list.tail].next = slot;
  list.tail = slot;
  ++list.size;
}

void RequestScheduler::list_remove(SlotList& list, Slot slot) {
  Entry& e = entries_[slot];
  if (e.prev == kNone)
    list.head = e.next;
  else
    entries_[e.prev].next = e.next;
  if (e.next == kNone)
    list.tail = e.prev;
  else
    entries_[e.next].prev = e.prev;
  e.prev = e.next = kNone;
  --list.size;
}

namespace {

// Chains of the position index, over either pair of link fields of an entry.
template <class Entries, class Chain>
void chain_append(Entries& entries, Chain& chain, std::uint32_t slot, std::uint32_t none,
                  std::uint32_t Entries::value_type::*prev,
                  std::uint32_t Entries::value_type::*next) {
  entries[slot].*prev = chain.tail;
  entries[slot].*next = none;
  if (chain.tail == none)
    chain.head = slot;
  else
    entries[chain.tail].*next = slot;
  chain.tail = slot;
}

template <class Entries, class Chain>
void chain_unlink(Entries& entries, Chain& chain, std::uint32_t slot, std::uint32_t none,
                  std::uint32_t Entries::value_type::*prev,
                  std::uint32_t Entries::value_type::*next) {
  auto& e = entries[slot];
  if (e.*prev == none)
    chain.head = e.*next;
  else
    entries[e.*prev].*next = e.*next;
  if (e.*next == none)
    chain.tail = e.*prev;
  else
    entries[e.*next].*prev = e.*prev;
  e.*prev = e.*next = none;
}

}  // namespace

std::size_t RequestScheduler::table_find(const PositionTable& t, const PositionKey& k,
                                         std::uint64_t h, Side side) const {
  const std::size_t mask = t.cells.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const PositionCell& c = t.cells[i];
    if (c.chain.head == kNone) return kNoCell;
    if (c.hash == h && key(c.chain.head, side) == k) return i;
  }
}

void RequestScheduler::table_grow(PositionTable& t) {
  std::vector<PositionCell> old(t.cells.size() * 2);
  old.swap(t.cells);
  const std::size_t mask = t.cells.size() - 1;
  for (const PositionCell& c : old) {
    if (c.chain.head == kNone) continue;
    std::size_t i = c.hash & mask;
    while (t.cells[i].chain.head != kNone) i = (i + 1) & mask;
    t.cells[i] = c;
  }
}

void RequestScheduler::table_add(PositionTable& t, Slot slot, Side side) {
  const PositionKey k = key(slot, side);
  const std::uint64_t h = hash(k);
  std::size_t i = table_find(t, k, h, side);
  if (i == kNoCell) {
    if ((t.size + 1) * 2 > t.cells.size()) table_grow(t);
    const std::size_t mask = t.cells.size() - 1;
    for (i = h & mask; t.cells[i].chain.head != kNone; i = (i + 1) & mask) {
    }
    t.cells[i].hash = h;
    ++t.size;
  }
  if (side == Side::Start)
    chain_append(entries_, t.cells[i].chain, slot, kNone, &Entry::start_prev, &Entry::start_next);
  else
    chain_append(entries_, t.cells[i].chain, slot, kNone, &Entry::end_prev, &Entry::end_next);
}

void RequestScheduler::table_remove(PositionTable& t, Slot slot, Side side) {
  const PositionKey k = key(slot, side);
  std::size_t i = table_find(t, k, hash(k), side);
  Chain& chain = t.cells[i].chain;
  if (side == Side::Start)
    chain_unlink(entries_, chain, slot, kNone, &Entry::start_prev, &Entry::start_next);
  else
    chain_unlink(entries_, chain, slot, kNone, &Entry::end_prev, &Entry::end_next);
  if (chain.head != kNone) return;
  // Backward shift: move later cells of the probe run into the hole unless their home lies
  // cyclically in (hole, cell].
  const std::size_t mask = t.cells.size() - 1;
  for (std::size_t j = (i + 1) & mask; t.cells[j].chain.head != kNone; j = (j + 1) & mask) {
    const std::size_t home = t.cells[j].hash & mask;
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    t.cells[i] = t.cells[j];
    i = j;
  }
  t.cells[i] = PositionCell{};
  --t.size;
}

void RequestScheduler::index_add(Slot slot) {
  table_add(starts_, slot, Side::Start);
  table_add(ends_, slot, Side::End);
}

void RequestScheduler::index_remove(Slot slot) {
  table_remove(starts_, slot, Side::Start);
  table_remove(ends_, slot, Side::End);
}

RequestScheduler::Slot RequestScheduler::index_find(const PositionKey& k, Side side) const {
  const PositionTable& t = side == Side::Start ? starts_ : ends_;
  const std::size_t i = table_find(t, k, hash(k), side);
  return i == kNoCell ? kNone : t.cells[i].chain.head;
}

}  // namespace harmonia::core::requests
