// Request schedulers: enqueue plus dequeue (and release) of one request with 10,000 requests
// queued, per algorithm. Each iteration enqueues one request, then dequeues until 10,000 or fewer
// are queued again, releasing every dispatch at once; so the time per iteration is the cost of one
// request's whole way through the scheduler at that queue length.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "core/requests/registry.hpp"

using namespace harmonia::core;
using namespace harmonia::core::requests;

namespace {

constexpr int kServers = 8;

/// 64 clients over 16 files, each writing or reading its own region in consecutive chunks of
/// 32 KiB to 4 MiB (with jumps), 1 MiB stripes over 8 servers.
std::vector<Request> stream(std::size_t count) {
  std::mt19937_64 rng(42);
  constexpr int kClients = 64;
  std::uniform_int_distribution<int> client(0, kClients - 1), shift(15, 22);
  std::bernoulli_distribution jump(0.2);
  std::vector<std::uint64_t> cursor(kClients);
  for (int c = 0; c < kClients; ++c) cursor[static_cast<std::size_t>(c)] = std::uint64_t(c) << 36;
  std::vector<Request> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const int c = client(rng);
    auto& at = cursor[static_cast<std::size_t>(c)];
    if (jump(rng)) at += std::uint64_t{1} << 24;
    const std::uint64_t length = std::uint64_t{1} << shift(rng);
    out.push_back({0, static_cast<FileHandle>(c % 16), at, length, c % 2 ? Op::Write : Op::Read,
                   c % 4, static_cast<ServerId>((at >> 20) % kServers), 0});
    at += length;
  }
  return out;
}

void bench_scheduler(benchmark::State& state, const std::string& name) {
  const auto queued = static_cast<std::size_t>(state.range(0));
  const Options options = {{"twins.servers", std::to_string(kServers)}};
  auto s = make_request_scheduler(name, options);
  static const std::vector<Request> requests = stream(1 << 20);
  RequestId id = 0;
  Time now = 0;
  std::size_t dispatches = 0, issued = 0;
  auto add = [&] {
    Request r = requests[id % requests.size()];
    r.id = id++;
    r.arrival = now;
    s->enqueue(r);
  };
  auto drain_to = [&](std::size_t target) {
    while (s->queued() > target) {
      const Batch b = s->dequeue(now);
      for (const Dispatch& d : b.dispatches) {
        ++dispatches;
        issued += d.parts.size();
        for (const Request& part : d.parts) s->release(part.id, 10 * kMicrosecond);
      }
      if (b.dispatches.empty()) now = b.retry_at;  // a window or quantum policy waits
    }
  };
  while (s->queued() < queued) add();
  for (auto _ : state) {
    add();
    drain_to(queued);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["requests_per_dispatch"] =
      dispatches ? static_cast<double>(issued) / static_cast<double>(dispatches) : 0.0;
}

}  // namespace

BENCHMARK_CAPTURE(bench_scheduler, fifo, std::string("fifo"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, to, std::string("to"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, to_agg, std::string("to-agg"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, hbrr, std::string("hbrr"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, sjf, std::string("sjf"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, mlf, std::string("mlf"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, aioli, std::string("aioli"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, sw, std::string("sw"))->Arg(10000);
BENCHMARK_CAPTURE(bench_scheduler, twins, std::string("twins"))->Arg(10000);
