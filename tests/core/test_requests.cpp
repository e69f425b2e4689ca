// Request schedulers of the forwarding layer: hand-checked orders and aggregations per algorithm,
// TWINS' windows and permutations, and properties on random request streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "core/requests/flat_map.hpp"
#include "core/requests/registry.hpp"
#include "core/requests/schedulers.hpp"

using namespace harmonia::core;
using namespace harmonia::core::requests;

namespace {

constexpr Time us = kMicrosecond;

Request req(RequestId id, FileHandle file, std::uint64_t offset, std::uint64_t length,
            Op op = Op::Write, AppId app = 0, ServerId server = 0, Time arrival = 0) {
  return {id, file, offset, length, op, app, server, arrival};
}

using Ids = std::vector<RequestId>;

Ids ids(const Dispatch& d) {
  Ids out;
  for (const auto& p : d.parts) out.push_back(p.id);
  return out;
}

/// Part ids of every dispatch of one batch.
std::vector<Ids> ids(const Batch& b) {
  std::vector<Ids> out;
  for (const auto& d : b.dispatches) out.push_back(ids(d));
  return out;
}

/// Dequeues one dispatch at `now` and releases it at once with `latency`.
Ids next(RequestScheduler& s, Time now = 0, Time latency = 1) {
  const Batch b = s.dequeue(now);
  if (b.dispatches.empty()) return {};
  EXPECT_EQ(b.dispatches.size(), 1u);
  for (const auto& p : b.dispatches.front().parts) s.release(p.id, latency);
  return ids(b.dispatches.front());
}

/// Every dispatch, one dequeue at a time at `now`, until the scheduler has nothing to issue.
std::vector<Ids> drain(RequestScheduler& s, Time now = 0) {
  std::vector<Ids> out;
  for (Ids d = next(s, now); !d.empty(); d = next(s, now)) out.push_back(d);
  return out;
}

std::unique_ptr<RequestScheduler> make(const std::string& name, const Options& options = {}) {
  return make_request_scheduler(name, options);
}

/// The message of the std::invalid_argument that `f` throws ("" if none).
template <class F>
std::string invalid_argument_message(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Registry and options

TEST(RequestRegistry, KnowsEveryAlgorithm) {
  EXPECT_EQ(request_scheduler_names(),
            (std::vector<std::string>{"fifo", "to", "to-agg", "hbrr", "sjf", "mlf", "aioli", "sw",
                                      "twins"}));
  for (const auto& name : request_scheduler_names()) {
    const Options options = name == "twins" ? Options{{"twins.servers", "2"}} : Options{};
    EXPECT_EQ(make(name, options)->name(), name);
  }
  EXPECT_THROW(make("nope"), std::invalid_argument);
}

TEST(RequestRegistry, OptionErrorsNameTheOption) {
  EXPECT_NE(invalid_argument_message([] {
              make("to-agg", {{"to-agg.max_byte", "1"}});
            }).find("to-agg.max_byte"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              make("fifo", {{"fifo.max_bytes", "1"}});
            }).find("fifo.max_bytes"),
            std::string::npos)
      << "fifo does not aggregate";
  for (const std::string bad : {"0", "abc", "-1", "", "12x", "99999999999999999999"}) {
    const std::string message = invalid_argument_message([&] {
      make("twins", {{"twins.servers", "4"}, {"twins.window_us", bad}});
    });
    EXPECT_NE(message.find("twins.window_us"), std::string::npos) << "value '" << bad << "'";
  }
  EXPECT_NE(invalid_argument_message([] { make("twins"); }).find("twins.servers"),
            std::string::npos)
      << "TWINS needs the number of servers";
  EXPECT_NE(invalid_argument_message([] {
              make("to", {{"tw1ns.window_us", "5"}});
            }).find("tw1ns.window_us"),
            std::string::npos)
      << "a prefix that names no algorithm is a typo";
  EXPECT_NE(invalid_argument_message([] {
              make("to", {{"window_us", "5"}});
            }).find("window_us"),
            std::string::npos);
  // Other algorithms' options are ignored, so one map can configure all of them.
  EXPECT_NO_THROW(make("to", {{"twins.window_us", "5"}, {"to-agg.max_bytes", "1024"}}));
  EXPECT_NO_THROW(make("mlf", {{"mlf.quantum_bytes", "4096"}, {"mlf.max_requests", "1"}}));
}

// What harmonia-describe lists is exactly what each algorithm reads: every listed option, at its
// bounds, is accepted, one past them is refused naming it, and a name not listed is unknown.
TEST(RequestRegistry, DescribedOptionsAreTheOptionsAccepted) {
  const auto twins = request_scheduler_options("twins");
  const auto servers = std::find_if(twins.begin(), twins.end(),
                                    [](const OptionSpec& s) { return s.name == "twins.servers"; });
  ASSERT_NE(servers, twins.end());
  EXPECT_TRUE(servers->required);
  const auto window = std::find_if(twins.begin(), twins.end(),
                                   [](const OptionSpec& s) { return s.name == "twins.window_us"; });
  ASSERT_NE(window, twins.end());
  EXPECT_FALSE(window->required);
  EXPECT_EQ(window->fallback, 1000u);
  EXPECT_TRUE(request_scheduler_options("fifo").empty());

  for (const auto& name : request_scheduler_names()) {
    const auto specs = request_scheduler_options(name);
    Options required;
    for (const auto& spec : specs)
      if (spec.required) required[spec.name] = std::to_string(spec.min);
    EXPECT_NO_THROW(make(name, required)) << name;
    for (const auto& spec : specs) {
      for (const auto value : {spec.min, spec.max}) {
        Options options = required;
        options[spec.name] = std::to_string(value);
        EXPECT_NO_THROW(make(name, options)) << spec.name << " = " << value;
      }
      if (spec.max < UINT64_MAX) {
        Options options = required;
        options[spec.name] = std::to_string(spec.max + 1);
        EXPECT_NE(invalid_argument_message([&] { make(name, options); }).find(spec.name),
                  std::string::npos)
            << spec.name << " above its maximum";
      }
    }
    Options unknown = required;
    unknown[name + ".not_an_option"] = "1";
    EXPECT_THROW(make(name, unknown), std::invalid_argument) << name;
  }
  EXPECT_THROW(request_scheduler_options("nope"), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The open-addressing map behind the hot paths

TEST(FlatMap, MatchesStdMapUnderRandomOperations) {
  struct PoorHash {  // long probe runs, so that backward-shift deletion is exercised
    std::uint64_t operator()(std::uint64_t k) const { return k % 7; }
  };
  FlatMap<std::uint64_t, int, PoorHash> flat;
  std::map<std::uint64_t, int> reference;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint64_t> key(0, 300);
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t k = key(rng);
    if (rng() % 3 == 0) {
      flat.erase(k);
      reference.erase(k);
    } else {
      bool inserted = false;
      flat.try_emplace(k, i, inserted) += 1;
      const auto [it, added] = reference.try_emplace(k, i);
      it->second += 1;
      EXPECT_EQ(inserted, added);
    }
    ASSERT_EQ(flat.size(), reference.size());
  }
  for (std::uint64_t k = 0; k <= 300; ++k) {
    const int* v = flat.find(k);
    const auto it = reference.find(k);
    ASSERT_EQ(v != nullptr, it != reference.end()) << k;
    if (v != nullptr) {
      EXPECT_EQ(*v, it->second);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Protocol checks shared by every algorithm

TEST(RequestScheduler, RejectsProtocolErrors) {
  auto s = make("to");
  s->enqueue(req(1, 0, 0, 10, Op::Write, 0, 0, 5 * us));
  EXPECT_THROW(s->enqueue(req(1, 0, 100, 10, Op::Write, 0, 0, 5 * us)), std::invalid_argument)
      << "duplicate id";
  EXPECT_THROW(s->enqueue(req(2, 0, 0, 0, Op::Write, 0, 0, 5 * us)), std::invalid_argument)
      << "zero length";
  EXPECT_THROW(s->enqueue(req(3, 0, UINT64_MAX - 5, 10, Op::Write, 0, 0, 5 * us)),
               std::invalid_argument);
  EXPECT_THROW(s->enqueue(req(4, 0, 0, 10, Op::Write, 0, 0, 4 * us)), std::invalid_argument)
      << "arrival before the clock";
  EXPECT_THROW(s->dequeue(4 * us), std::invalid_argument) << "clock going backwards";
  EXPECT_THROW(s->release(1, 1), std::logic_error) << "queued, not in flight";
  EXPECT_EQ(ids(s->dequeue(5 * us)), (std::vector<Ids>{{1}}));
  EXPECT_EQ(s->queued(), 0u);
  EXPECT_EQ(s->in_flight(), 1u);
  EXPECT_THROW(s->enqueue(req(1, 0, 0, 10, Op::Write, 0, 0, 5 * us)), std::invalid_argument)
      << "still in flight";
  EXPECT_THROW(s->release(1, -1), std::invalid_argument);
  s->release(1, 3 * us);
  EXPECT_THROW(s->release(1, 3 * us), std::logic_error) << "released twice";
  EXPECT_EQ(s->in_flight(), 0u);
  EXPECT_NO_THROW(s->enqueue(req(1, 0, 0, 10, Op::Write, 0, 0, 5 * us))) << "ids may be reused";
}

TEST(RequestScheduler, RejectedRequestLeavesNoTrace) {
  auto s = make("twins", {{"twins.servers", "2"}});
  EXPECT_NE(invalid_argument_message([&] {
              s->enqueue(req(7, 0, 0, 10, Op::Read, 0, 2));
            }).find("twins.servers = 2"),
            std::string::npos);
  EXPECT_EQ(s->queued(), 0u);
  s->enqueue(req(7, 0, 0, 10, Op::Read, 0, 1));
  EXPECT_EQ(s->queued(), 1u);
}

TEST(RequestScheduler, SecondsConversion) {
  EXPECT_EQ(from_seconds(1.5), 1'500'000'000);
  EXPECT_EQ(from_seconds(1e-9), 1);
  EXPECT_DOUBLE_EQ(to_seconds(2'500'000'000), 2.5);
}

// ---------------------------------------------------------------------------------------------
// FIFO and time order

TEST(Fifo, IssuesEverythingAtOnceInArrivalOrderWithoutMerging) {
  auto s = make("fifo");
  s->enqueue(req(1, 0, 100, 100));
  s->enqueue(req(2, 0, 0, 100));
  s->enqueue(req(3, 0, 200, 100));
  const Batch b = s->dequeue(0);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{1}, {2}, {3}}));
  EXPECT_EQ(b.retry_at, kNever);
  EXPECT_TRUE(s->dequeue(0).dispatches.empty());
}

TEST(TimeOrder, OneRequestPerDequeueOldestFirst) {
  auto s = make("to");
  s->enqueue(req(1, 0, 100, 100));
  s->enqueue(req(2, 0, 0, 100));
  Batch b = s->dequeue(3 * us);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{1}}));
  EXPECT_EQ(b.retry_at, 3 * us) << "more to issue at once";
  b = s->dequeue(3 * us);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{2}})) << "contiguous, but TO never merges";
  EXPECT_EQ(b.retry_at, kNever);
}

namespace {
/// The hand-checked queue of the aggregation tests: file 1 unless said otherwise.
void fill_aggregation_queue(RequestScheduler& s) {
  s.enqueue(req(1, 1, 100, 100));            // head: [100, 200)
  s.enqueue(req(2, 1, 300, 100));            // [300, 400)
  s.enqueue(req(3, 1, 0, 100));              // [0, 100): merges backwards
  s.enqueue(req(4, 1, 200, 100, Op::Read));  // a read: never merged with writes
  s.enqueue(req(5, 1, 200, 100));            // [200, 300)
  s.enqueue(req(6, 2, 400, 100));            // another file
  s.enqueue(req(7, 1, 400, 100));            // [400, 500)
}
}  // namespace

TEST(TimeOrderAggregation, MergesContiguousRequestsAroundTheOldest) {
  auto s = make("to-agg");
  fill_aggregation_queue(*s);
  const Batch b = s->dequeue(0);
  ASSERT_EQ(b.dispatches.size(), 1u);
  const Dispatch& d = b.dispatches.front();
  EXPECT_EQ(ids(d), (Ids{3, 1, 5, 2, 7})) << "parts in offset order";
  EXPECT_EQ(d.file, 1u);
  EXPECT_EQ(d.op, Op::Write);
  EXPECT_EQ(d.offset, 0u);
  EXPECT_EQ(d.length, 500u);
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{4}, {6}}));
}

TEST(TimeOrderAggregation, RespectsRequestAndByteLimits) {
  auto two = make("to-agg", {{"to-agg.max_requests", "2"}});
  fill_aggregation_queue(*two);
  EXPECT_EQ(drain(*two), (std::vector<Ids>{{1, 5}, {2, 7}, {3}, {4}, {6}}));

  // 250 bytes: [100, 300) takes 5 forwards; 2 (forwards) and 3 (backwards) would exceed it.
  auto bytes = make("to-agg", {{"to-agg.max_bytes", "250"}});
  fill_aggregation_queue(*bytes);
  EXPECT_EQ(drain(*bytes), (std::vector<Ids>{{1, 5}, {2, 7}, {3}, {4}, {6}}));
}

TEST(TimeOrderAggregation, ForwardFirstThenBackwardAndOldestCandidate) {
  auto s = make("to-agg", {{"to-agg.max_bytes", "250"}});
  s->enqueue(req(1, 0, 100, 200));  // head [100, 300)
  s->enqueue(req(2, 0, 300, 200));  // forwards, but 400 bytes > 250
  s->enqueue(req(3, 0, 50, 50));    // backwards, fits
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{3, 1}, {2}}));

  auto dup = make("to-agg");
  dup->enqueue(req(1, 0, 0, 100));
  dup->enqueue(req(2, 0, 100, 50));  // two candidates start at 100: the older one is taken
  dup->enqueue(req(3, 0, 100, 100));
  EXPECT_EQ(drain(*dup), (std::vector<Ids>{{1, 2}, {3}}));
}

TEST(TimeOrderAggregation, OversizedRequestGoesAlone) {
  auto s = make("to-agg", {{"to-agg.max_bytes", "100"}});
  s->enqueue(req(1, 0, 0, 1000));
  s->enqueue(req(2, 0, 1000, 10));
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{1}, {2}}));
}

// ---------------------------------------------------------------------------------------------
// HBRR

TEST(Hbrr, HandlesTakeTurnsAndMergeWithinAHandle) {
  auto s = make("hbrr");
  s->enqueue(req(1, 10, 0, 10));    // handle A
  s->enqueue(req(2, 10, 100, 10));  // A
  s->enqueue(req(3, 20, 0, 10));    // handle B
  s->enqueue(req(4, 10, 10, 10));   // A, contiguous to 1
  s->enqueue(req(5, 20, 50, 10));   // B
  EXPECT_EQ(next(*s), (Ids{1, 4}));
  EXPECT_EQ(next(*s), (Ids{3}));
  s->enqueue(req(6, 30, 0, 10));  // handle C joins the ring at its tail
  EXPECT_EQ(next(*s), (Ids{2}));
  EXPECT_EQ(next(*s), (Ids{5}));
  EXPECT_EQ(next(*s), (Ids{6}));
  EXPECT_EQ(s->dequeue(0).retry_at, kNever);
}

TEST(Hbrr, BatchIssuesSeveralRequestsPerTurn) {
  auto s = make("hbrr", {{"hbrr.batch", "2"}});
  s->enqueue(req(1, 10, 0, 10));
  s->enqueue(req(2, 10, 100, 10));
  s->enqueue(req(3, 10, 200, 10));
  s->enqueue(req(4, 20, 0, 10));
  EXPECT_EQ(ids(s->dequeue(0)), (std::vector<Ids>{{1}, {2}}));
  EXPECT_EQ(ids(s->dequeue(0)), (std::vector<Ids>{{4}}));
  EXPECT_EQ(ids(s->dequeue(0)), (std::vector<Ids>{{3}}));
}

// ---------------------------------------------------------------------------------------------
// SJF

TEST(Sjf, SmallestQueueFirstLowestOffsetFirst) {
  auto s = make("sjf");
  s->enqueue(req(1, 1, 500, 100));  // file 1 writes: 300 bytes
  s->enqueue(req(2, 1, 0, 100));
  s->enqueue(req(3, 1, 100, 100));
  s->enqueue(req(4, 2, 0, 50));             // file 2 writes: 50 bytes
  s->enqueue(req(5, 1, 0, 100, Op::Read));  // file 1 reads: 200 bytes
  s->enqueue(req(6, 1, 300, 100, Op::Read));
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{4}, {5}, {6}, {2, 3}, {1}}));
}

TEST(Sjf, TiesGoToTheQueueCreatedFirst) {
  auto s = make("sjf");
  s->enqueue(req(1, 7, 0, 100));
  s->enqueue(req(2, 3, 0, 100));
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{1}, {2}}));
}

// ---------------------------------------------------------------------------------------------
// MLF

TEST(Mlf, QuantaGrowWithVisitsAndFilesTakeTurns) {
  auto s = make("mlf", {{"mlf.quantum_bytes", "100"}});
  s->enqueue(req(1, 1, 0, 250, Op::Read));    // needs 3 visits of file 1
  s->enqueue(req(2, 2, 0, 100, Op::Read));    // 1 visit of file 2
  s->enqueue(req(3, 2, 500, 100, Op::Read));  // 1 visit of file 2
  // Visit 1 of file 1: nothing; visit 1 of file 2: 2 and 3 eligible, lowest offset first.
  EXPECT_EQ(next(*s), (Ids{2}));
  // Visit 2 of file 1: nothing; visit 2 of file 2: 3.
  EXPECT_EQ(next(*s), (Ids{3}));
  // Visit 3 of file 1: its quantum (300) covers 250.
  EXPECT_EQ(next(*s), (Ids{1}));
}

TEST(Mlf, ReadsBeforeWritesAndSkipsIdleRounds) {
  auto s = make("mlf", {{"mlf.quantum_bytes", "8"}});
  s->enqueue(req(1, 1, 0, 100));               // write: 13 visits of the write queue
  s->enqueue(req(2, 1, 100, 4096, Op::Read));  // read: 512 visits of the read queue
  s->enqueue(req(3, 1, 0, 8, Op::Read));       // read: 1 visit
  EXPECT_EQ(next(*s), (Ids{3})) << "reads are visited first";
  // Then visits alternate read (nothing) -> write until the write is eligible after 13 visits;
  // the read queue, visited at each of them too, is then at 14 of 512.
  EXPECT_EQ(next(*s), (Ids{1}));
  EXPECT_EQ(next(*s), (Ids{2}));
}

TEST(Mlf, MergesContiguousRequestsOfTheSelectedQueue) {
  auto s = make("mlf", {{"mlf.quantum_bytes", "100"}});
  s->enqueue(req(1, 1, 100, 100));
  s->enqueue(req(2, 1, 0, 100));
  s->enqueue(req(3, 1, 200, 1000));  // not eligible yet, merged all the same
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{2, 1, 3}}));
}

// ---------------------------------------------------------------------------------------------
// aIOLi

TEST(Aioli, OldestEligibleHeadFirstAndSynchronous) {
  auto s = make("aioli", {{"aioli.quantum_bytes", "100"}, {"aioli.time_quantum_us", "10"}});
  s->enqueue(req(1, 1, 0, 300, Op::Read));  // eligible at round 3
  s->enqueue(req(2, 2, 0, 100, Op::Read));  // eligible at round 1
  s->enqueue(req(3, 3, 0, 100, Op::Read));
  Batch b = s->dequeue(0);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{2}}));
  EXPECT_EQ(b.retry_at, kNever) << "waits for the release";
  b = s->dequeue(1 * us);
  EXPECT_TRUE(b.dispatches.empty()) << "synchronous: one dispatch in flight at a time";
  EXPECT_EQ(b.retry_at, kNever);
  s->release(2, 20 * us);
  EXPECT_EQ(next(*s, 30 * us, 1 * us), (Ids{3}));  // round 2
  EXPECT_EQ(next(*s, 40 * us), (Ids{1}));          // round 3
}

TEST(Aioli, QueueKeepsTheSchedulerForItsTimeQuantum) {
  auto run = [](Time latency) {
    auto s = make("aioli", {{"aioli.quantum_bytes", "100"}, {"aioli.time_quantum_us", "10"}});
    s->enqueue(req(1, 1, 0, 100, Op::Read));
    s->enqueue(req(2, 2, 0, 100, Op::Read));
    s->enqueue(req(3, 1, 500, 100, Op::Read));
    s->enqueue(req(4, 1, 1000, 100, Op::Read));
    std::vector<Ids> order;
    for (Ids d = next(*s, 0, latency); !d.empty(); d = next(*s, 0, latency)) order.push_back(d);
    return order;
  };
  // 3 us each: file 1 issues three requests within its 10 us.
  EXPECT_EQ(run(3 * us), (std::vector<Ids>{{1}, {3}, {4}, {2}}));
  // 6 us each: the quantum is used up after two; file 2's head (older than 4) goes next.
  EXPECT_EQ(run(6 * us), (std::vector<Ids>{{1}, {3}, {2}, {4}}));
}

TEST(Aioli, TimeQuantumAdaptsToItsUse) {
  auto s = make("aioli", {{"aioli.quantum_bytes", "100"}, {"aioli.time_quantum_us", "10"}});
  s->enqueue(req(1, 1, 0, 100, Op::Read));
  EXPECT_EQ(next(*s, 0, 20 * us), (Ids{1}));  // used 200 % of 10 us: the quantum doubles
  for (RequestId id = 2; id <= 7; ++id) s->enqueue(req(id, 1, id * 1000, 100, Op::Read));
  // 6 us each against 20 us: four requests in the turn (6, 12, 18, 24).
  std::vector<Ids> order;
  for (int i = 0; i < 4; ++i) order.push_back(next(*s, 0, 6 * us));
  EXPECT_EQ(order, (std::vector<Ids>{{2}, {3}, {4}, {5}}));
  s->enqueue(req(8, 2, 0, 100, Op::Read));
  EXPECT_EQ(next(*s, 0, 1 * us), (Ids{6})) << "file 1's head is older than file 2's";
}

TEST(Aioli, AggregatesTheSelectedHead) {
  auto s = make("aioli", {{"aioli.quantum_bytes", "1000"}});
  s->enqueue(req(1, 1, 100, 100));
  s->enqueue(req(2, 1, 0, 100));
  EXPECT_EQ(drain(*s), (std::vector<Ids>{{2, 1}})) << "head is the lowest offset";
}

// ---------------------------------------------------------------------------------------------
// SW

TEST(StaticWindows, WindowThenApplicationThenArrival) {
  auto s = make("sw", {{"sw.window_us", "100"}});
  s->enqueue(req(1, 0, 0, 10, Op::Write, 2, 0, 0));
  s->enqueue(req(2, 0, 10, 10, Op::Write, 1, 0, 10 * us));
  s->enqueue(req(3, 0, 20, 10, Op::Write, 0, 0, 50 * us));
  s->enqueue(req(4, 0, 30, 10, Op::Write, 0, 0, 150 * us));  // next window
  s->enqueue(req(5, 0, 40, 10, Op::Write, 1, 0, 199 * us));
  s->enqueue(req(6, 0, 50, 10, Op::Write, 0, 0, 199 * us));
  EXPECT_EQ(drain(*s, 200 * us), (std::vector<Ids>{{3}, {2}, {1}, {4}, {6}, {5}}))
      << "contiguous requests are not merged either";
}

// ---------------------------------------------------------------------------------------------
// TWINS

TEST(Twins, PermutationsAreRotationsFormingALatinSquare) {
  EXPECT_EQ(twins_permutation(0, 4), (std::vector<ServerId>{0, 1, 2, 3}));
  EXPECT_EQ(twins_permutation(1, 4), (std::vector<ServerId>{1, 2, 3, 0}));
  EXPECT_EQ(twins_permutation(6, 4), (std::vector<ServerId>{2, 3, 0, 1}));
  for (int servers = 1; servers <= 9; ++servers) {
    for (std::uint64_t w = 0; w < 3 * static_cast<std::uint64_t>(servers); ++w) {
      // As many nodes as servers: each server has exactly one node in every window.
      std::vector<int> load(static_cast<std::size_t>(servers));
      for (int node = 0; node < servers; ++node) {
        const ServerId s = twins_server(node, servers, w);
        EXPECT_EQ(s, twins_permutation(node, servers)[w % static_cast<std::uint64_t>(servers)]);
        ++load[static_cast<std::size_t>(s)];
      }
      EXPECT_EQ(std::count(load.begin(), load.end(), 1), servers);
      // Two and a half times as many nodes: every server has 2 or 3, never more.
      std::vector<int> crowd(static_cast<std::size_t>(servers));
      for (int node = 0; node < 2 * servers + servers / 2; ++node)
        ++crowd[static_cast<std::size_t>(twins_server(node, servers, w))];
      for (int c : crowd) EXPECT_TRUE(c == 2 || c == 3) << c;
    }
  }
}

TEST(Twins, ServesOnlyTheWindowsServerAndWaitsForTheNextUsefulWindow) {
  auto s = make("twins", {{"twins.servers", "4"}, {"twins.node", "1"}, {"twins.window_us", "100"}});
  s->enqueue(req(10, 1, 0, 100, Op::Read, 0, 0));
  s->enqueue(req(11, 1, 100, 100, Op::Read, 0, 1));
  s->enqueue(req(12, 1, 200, 100, Op::Read, 0, 2));
  s->enqueue(req(13, 1, 300, 100, Op::Read, 0, 3));
  s->enqueue(req(14, 1, 500, 100, Op::Read, 0, 1));  // server 1, contiguous to nothing there
  s->enqueue(req(15, 1, 400, 100, Op::Read, 0, 1));  // server 1, contiguous to 14
  // Node 1 visits servers 1, 2, 3, 0.
  Batch b = s->dequeue(0);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{11}})) << "10 and 12 are contiguous but on other servers";
  EXPECT_EQ(b.retry_at, 0);
  b = s->dequeue(0);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{15, 14}}))
      << "13 ends where 15 starts but is on server 3: never merged across servers";
  EXPECT_EQ(b.retry_at, 100 * us) << "server 2's window";
  b = s->dequeue(50 * us);
  EXPECT_TRUE(b.dispatches.empty());
  EXPECT_EQ(b.retry_at, 100 * us);
  EXPECT_EQ(ids(s->dequeue(100 * us)), (std::vector<Ids>{{12}}));
  b = s->dequeue(199 * us);
  EXPECT_TRUE(b.dispatches.empty());
  EXPECT_EQ(b.retry_at, 200 * us);
  b = s->dequeue(250 * us);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{13}}));
  EXPECT_EQ(b.retry_at, 300 * us);
  b = s->dequeue(300 * us);
  EXPECT_EQ(ids(b), (std::vector<Ids>{{10}}));
  EXPECT_EQ(b.retry_at, kNever);
  // Windows with nothing to do are skipped in retry_at: only server 0 has work, which node 1
  // serves in windows 3, 7, 11...
  s->enqueue(req(20, 1, 0, 100, Op::Read, 0, 0, 420 * us));
  b = s->dequeue(420 * us);
  EXPECT_TRUE(b.dispatches.empty());
  EXPECT_EQ(b.retry_at, 700 * us);
}

TEST(Twins, EachNodeFollowsItsPermutationWindowByWindow) {
  constexpr int kServers = 5;
  for (int node = 0; node < 7; ++node) {
    auto s = make("twins", {{"twins.servers", std::to_string(kServers)},
                            {"twins.node", std::to_string(node)},
                            {"twins.window_us", "1000"}});
    const auto order = twins_permutation(node, kServers);
    RequestId id = 0;
    for (int w = 0; w < 3 * kServers; ++w) {
      const Time start = w * 1000 * us;
      for (ServerId server = 0; server < kServers; ++server) {
        ++id;
        s->enqueue(req(id, 9, id * 4096, 4096, Op::Read, 0, server, start));
      }
      // The window's server gets all its requests, the others none.
      std::set<ServerId> served;
      for (Batch b = s->dequeue(start); !b.dispatches.empty(); b = s->dequeue(start))
        for (const auto& d : b.dispatches) served.insert(d.server);
      EXPECT_EQ(served, (std::set<ServerId>{order[static_cast<std::size_t>(w % kServers)]}))
          << "node " << node << " window " << w;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Properties on random request streams

namespace {

struct Profile {
  std::string name;
  Options options;
  bool work_conserving;
};

constexpr int kServers = 4;
constexpr Time kTwinsWindow = 200 * us;

std::vector<Profile> profiles() {
  return {
      {"fifo", {}, true},
      {"to", {}, true},
      {"to-agg", {}, true},
      {"to-agg", {{"to-agg.max_requests", "3"}, {"to-agg.max_bytes", "262144"}}, true},
      {"hbrr", {}, true},
      {"hbrr", {{"hbrr.batch", "3"}, {"hbrr.max_requests", "2"}}, true},
      {"sjf", {}, true},
      {"mlf", {}, true},
      {"mlf", {{"mlf.quantum_bytes", "1048576"}, {"mlf.max_bytes", "1048576"}}, true},
      {"aioli", {}, false},
      {"aioli", {{"aioli.time_quantum_us", "50"}, {"aioli.max_requests", "4"}}, false},
      {"sw", {{"sw.window_us", "300"}}, true},
      {"twins", {{"twins.servers", "4"}, {"twins.node", "2"}, {"twins.window_us", "200"}}, false},
  };
}

/// A random stream: clients writing or reading their own run of a few files, in consecutive
/// chunks of 32 KiB to 4 MiB (so that many requests are contiguous), arriving in bursts.
std::vector<Request> random_stream(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  constexpr int kClients = 12;
  std::uniform_int_distribution<int> client(0, kClients - 1), shift(15, 22), gap(0, 40);
  std::bernoulli_distribution same_time(0.3), jump(0.1);
  std::vector<std::uint64_t> cursor(kClients);
  for (int c = 0; c < kClients; ++c) cursor[static_cast<std::size_t>(c)] = (c % 3) << 30;
  std::vector<Request> stream;
  Time t = 0;
  for (int i = 0; i < count; ++i) {
    const int c = client(rng);
    auto& at = cursor[static_cast<std::size_t>(c)];
    if (jump(rng)) at += std::uint64_t{1} << 20;
    const std::uint64_t length = std::uint64_t{1} << shift(rng);
    if (!same_time(rng)) t += gap(rng) * us;
    const auto file = static_cast<FileHandle>(c % 4);
    const auto server = static_cast<ServerId>((at >> 20) % kServers);
    stream.push_back({static_cast<RequestId>(i), file, at, length, c % 2 ? Op::Write : Op::Read,
                      c % 3, server, t});
    at += length;
  }
  return stream;
}

/// Drives a scheduler like a forwarding node: requests arrive on time, every dispatch completes
/// after a random latency, dequeue is called after every event and at every retry_at. Checks
/// every dispatch and returns the issue time of each request.
/// `max_in_flight` dispatches at most are outstanding (0: no limit), so that queues build up.
std::vector<Time> drive(const Profile& p, const std::vector<Request>& stream, std::uint64_t seed,
                        std::size_t max_in_flight) {
  auto s = make_request_scheduler(p.name, p.options);
  AggregationLimits limits;
  if (p.name != "fifo" && p.name != "to" && p.name != "sw") {
    limits.max_requests = 16;
    limits.max_bytes = std::uint64_t{64} << 20;
  }
  if (auto it = p.options.find(p.name + ".max_requests"); it != p.options.end())
    limits.max_requests = std::stoull(it->second);
  if (auto it = p.options.find(p.name + ".max_bytes"); it != p.options.end())
    limits.max_bytes = std::stoull(it->second);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Time> latency(1 * us, 60 * us);
  std::vector<Time> issued_at(stream.size(), -1);
  std::multimap<Time, Dispatch> completions;
  std::set<RequestId> queued;  // ids in enqueue order
  std::size_t next_arrival = 0;
  Time now = 0, wake = kNever;

  while (true) {
    while (next_arrival < stream.size() && stream[next_arrival].arrival <= now) {
      s->enqueue(stream[next_arrival]);
      queued.insert(stream[next_arrival].id);
      ++next_arrival;
    }
    while (!completions.empty() && completions.begin()->first <= now) {
      const Dispatch& d = completions.begin()->second;
      for (const auto& part : d.parts) s->release(part.id, latency(rng));
      completions.erase(completions.begin());
    }
    while (max_in_flight == 0 || completions.size() < max_in_flight) {
      const bool had_work = s->queued() > 0;
      const RequestId oldest = queued.empty() ? 0 : *queued.begin();
      const Batch b = s->dequeue(now);
      if (p.work_conserving && had_work) {
        EXPECT_FALSE(b.dispatches.empty()) << p.name << ": idle with requests queued";
      }
      for (const Dispatch& d : b.dispatches) {
        const bool first = &d == &b.dispatches.front();
        EXPECT_FALSE(d.parts.empty());
        std::uint64_t end = d.offset, bytes = 0;
        RequestId lowest = d.parts.front().id;
        for (const Request& part : d.parts) {
          const Request& original = stream.at(part.id);
          EXPECT_EQ(part.file, original.file);
          EXPECT_EQ(part.offset, original.offset);
          EXPECT_EQ(part.length, original.length);
          EXPECT_EQ(part.file, d.file);
          EXPECT_EQ(part.op, d.op);
          EXPECT_EQ(part.offset, end) << p.name << ": parts must tile the dispatch";
          end = part.offset + part.length;
          bytes += part.length;
          EXPECT_EQ(issued_at[part.id], -1) << p.name << ": request " << part.id << " twice";
          EXPECT_EQ(queued.erase(part.id), 1u);
          issued_at[part.id] = now;
          lowest = std::min(lowest, part.id);
        }
        EXPECT_EQ(end, d.offset + d.length);
        EXPECT_LE(d.parts.size(), limits.max_requests);
        if (d.parts.size() > 1) {
          EXPECT_LE(bytes, limits.max_bytes);
        }
        if (first && (p.name == "fifo" || p.name == "to" || p.name == "to-agg")) {
          // Time order: a dispatch is built around the oldest queued request.
          EXPECT_EQ(lowest, oldest) << p.name;
        }
        if (p.name == "twins") {
          const auto window = static_cast<std::uint64_t>(now / kTwinsWindow);
          for (const Request& part : d.parts) EXPECT_EQ(part.server, d.server);
          EXPECT_EQ(d.server, twins_server(2, kServers, window)) << "outside its window";
        }
        completions.emplace(now + latency(rng), d);
      }
      if (b.retry_at > now) {
        wake = b.retry_at;
        break;
      }
    }
    Time next_time = wake;
    if (next_arrival < stream.size()) next_time = std::min(next_time, stream[next_arrival].arrival);
    if (!completions.empty()) next_time = std::min(next_time, completions.begin()->first);
    if (next_time == kNever) break;
    EXPECT_GT(next_time, now);
    now = next_time;
    wake = kNever;
  }
  EXPECT_EQ(s->queued(), 0u) << p.name;
  EXPECT_EQ(s->in_flight(), 0u) << p.name;
  EXPECT_TRUE(queued.empty()) << p.name << ": requests lost";
  return issued_at;
}

}  // namespace

TEST(RequestProperties, NothingLostOrDuplicatedAndAggregatesTileTheOriginals) {
  for (const auto& p : profiles()) {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(p.name + " seed " + std::to_string(seed));
      const auto stream = random_stream(seed, 1500);
      for (std::size_t host : {0, 1, 4}) {
        const auto issued_at = drive(p, stream, seed * 7919, host);
        Time waited = 0;
        for (std::size_t i = 0; i < stream.size(); ++i) {
          EXPECT_GE(issued_at[i], stream[i].arrival) << "request " << i << " never issued";
          waited = std::max(waited, issued_at[i] - stream[i].arrival);
        }
        // With one dispatch at a time the queue builds up, so that the order matters (FIFO
        // hands everything over at once).
        if (host == 1 && p.name != "fifo") {
          EXPECT_GT(waited, 200 * us);
        }
      }
    }
  }
}

TEST(RequestProperties, AggregationHappensOnContiguousStreams) {
  // Sanity check of the generator and the aggregating algorithms: they do merge.
  for (const std::string name : {"to-agg", "hbrr", "sjf", "mlf", "aioli", "twins"}) {
    const Options options = name == "twins" ? Options{{"twins.servers", "4"}} : Options{};
    auto s = make_request_scheduler(name, options);
    const auto stream = random_stream(3, 400);
    for (auto r : stream) {
      r.arrival = 0;
      s->enqueue(r);
    }
    std::size_t dispatches = 0;
    Time now = 0;
    while (s->queued() > 0) {
      const Batch b = s->dequeue(now);
      for (const auto& d : b.dispatches) {
        ++dispatches;
        for (const auto& part : d.parts) s->release(part.id, 1 * us);
      }
      if (b.dispatches.empty()) now = b.retry_at;
    }
    EXPECT_LT(dispatches, stream.size() * 3 / 4) << name;
  }
}

TEST(RequestProperties, BoundedWaiting) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const auto stream = random_stream(seed, 1500);
    // Every work-conserving algorithm never idles with requests queued (checked in drive), so
    // once arrivals stop, Q queued requests are all issued within Q dequeues.
    for (const auto& p : profiles()) {
      if (!p.work_conserving) continue;
      SCOPED_TRACE(p.name + " seed " + std::to_string(seed));
      auto s = make_request_scheduler(p.name, p.options);
      for (auto r : stream) {
        r.arrival = 0;
        s->enqueue(r);
      }
      std::size_t calls = 0;
      while (s->queued() > 0 && calls <= stream.size()) {
        for (const auto& d : s->dequeue(0).dispatches)
          for (const auto& part : d.parts) s->release(part.id, 1 * us);
        ++calls;
      }
      EXPECT_EQ(s->queued(), 0u);
      EXPECT_LE(calls, stream.size());
    }
    // TWINS: with a host that drains each window, a request waits at most (servers - 1) windows.
    {
      const Profile twins = profiles().back();
      const auto issued_at = drive(twins, stream, seed, 0);
      for (std::size_t i = 0; i < stream.size(); ++i)
        EXPECT_LE(issued_at[i] - stream[i].arrival, (kServers - 1) * kTwinsWindow) << i;
    }
    // SW: a request never waits for a later window (the host keeps up in this stream).
    {
      const Profile sw = {"sw", {{"sw.window_us", "300"}}, true};
      const auto issued_at = drive(sw, stream, seed, 0);
      for (std::size_t i = 0; i < stream.size(); ++i)
        EXPECT_EQ(issued_at[i], stream[i].arrival) << "issued on arrival by a free host";
    }
  }
}

TEST(RequestProperties, HbrrServesEveryHandleWithinOneRound) {
  // With F handles and batch 1, a request with k older requests of its handle queued ahead of it
  // is issued within (k + 1) * F dequeues.
  constexpr int kFiles = 4;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const auto stream = random_stream(seed, 1000);
    auto s = make_request_scheduler("hbrr", {{"hbrr.max_requests", "1"}});
    std::map<RequestId, std::size_t> bound;  // latest dequeue count allowed
    std::vector<std::size_t> per_file(kFiles);
    std::map<RequestId, FileHandle> file_of;
    std::size_t calls = 0;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> burst(0, 3);
    std::size_t i = 0;
    while (i < stream.size() || s->queued() > 0) {
      for (int k = burst(rng); k > 0 && i < stream.size(); --k, ++i) {
        Request r = stream[i];
        r.arrival = 0;
        s->enqueue(r);
        bound[r.id] = calls + (per_file[r.file] + 1) * kFiles;
        ++per_file[r.file];
        file_of[r.id] = r.file;
      }
      ++calls;
      for (const auto& d : s->dequeue(0).dispatches)
        for (const auto& part : d.parts) {
          EXPECT_LE(calls, bound.at(part.id)) << "request " << part.id;
          --per_file[file_of[part.id]];
          s->release(part.id, 1);
        }
    }
  }
}

TEST(RequestProperties, StaticWindowsIssueTheSmallestKey) {
  // Under backlog, every dequeue issues the queued request with the smallest
  // (window, application, arrival).
  auto s = make_request_scheduler("sw", {{"sw.window_us", "100"}});
  const auto stream = random_stream(5, 1200);
  std::set<std::tuple<Time, AppId, RequestId>> keys;
  std::size_t i = 0;
  Time now = 0;
  while (i < stream.size() || !keys.empty()) {
    for (int k = 0; k < 3 && i < stream.size(); ++k, ++i) {
      now = stream[i].arrival;
      s->enqueue(stream[i]);
      keys.insert({stream[i].arrival / (100 * us), stream[i].app, stream[i].id});
    }
    const Batch b = s->dequeue(now);
    ASSERT_EQ(b.dispatches.size(), 1u);
    EXPECT_EQ(b.dispatches[0].parts[0].id, std::get<2>(*keys.begin()));
    keys.erase(keys.begin());
    s->release(b.dispatches[0].parts[0].id, 1);
  }
}
