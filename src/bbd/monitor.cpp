#include "bbd/monitor.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <thread>

#include "schedd/client.hpp"

namespace harmonia::bbd {

namespace {
constexpr auto kIdle = std::chrono::milliseconds(20);
constexpr auto kRetry = std::chrono::milliseconds(500);
/// How often an idle node looks for fences it no longer needs (a directory listing on the PFS).
constexpr auto kFenceSweep = std::chrono::seconds(10);
}  // namespace

Monitor::Monitor(Store& store, std::string schedd, std::string advertise, double threshold,
                 const std::atomic<unsigned>& in_flight)
    : store_(store),
      schedd_(std::move(schedd)),
      advertise_(std::move(advertise)),
      threshold_(threshold),
      in_flight_(in_flight) {}

void Monitor::start() {
  std::thread([this] { drain_loop(); }).detach();
  if (!schedd_.empty()) std::thread([this] { report_loop(); }).detach();
}

void Monitor::drain_loop() {
  auto next_fence_sweep = std::chrono::steady_clock::now() + kFenceSweep;
  for (;;) {
    control::DrainOrder order;
    bool managed = false;
    {
      std::lock_guard lock(mutex_);
      order = order_;
      managed = managed_;
    }
    std::set<std::string> jobs;
    if (managed && order.drain()) jobs.insert(order.jobs().begin(), order.jobs().end());
    if (!managed) {
      const StoreStats s = store_.stats();
      if (threshold_ < 1.0 && s.used > 0 &&
          static_cast<double>(s.used) >= threshold_ * static_cast<double>(s.capacity))
        for (const auto& held : s.held_by_job) jobs.insert(held.first);
    }
    std::string file, why;
    Status status = Status::Error;
    try {
      status = store_.drain_next(jobs, file, why);
    } catch (const std::exception& error) {  // a scheduler's protocol check: never fatal here
      why = error.what();
    }
    if (status == Status::NotHeld) {
      {
        std::lock_guard lock(mutex_);
        if (managed) acted_epoch_ = order.epoch();
      }
      if (std::chrono::steady_clock::now() >= next_fence_sweep) {
        store_.drop_stale_fences();
        next_fence_sweep = std::chrono::steady_clock::now() + kFenceSweep;
      }
      std::this_thread::sleep_for(kIdle);
    } else if (status != Status::Ok) {
      std::fprintf(stderr, "harmonia-bbd: drain of %s: %s\n", file.c_str(), why.c_str());
      std::this_thread::sleep_for(kRetry);
    }
  }
}

void Monitor::apply(const control::DrainOrder& order) {
  std::lock_guard lock(mutex_);
  if (order.epoch() >= order_.epoch() || !managed_) order_ = order;
}

void Monitor::report_loop() {
  bool warned = false;
  for (;;) {
    try {
      serve_scheduler();
    } catch (const std::exception& error) {
      if (!warned)
        std::fprintf(stderr,
                     "harmonia-bbd: scheduler %s: %s; draining at the threshold until it is back\n",
                     schedd_.c_str(), error.what());
      warned = true;
    }
    {
      std::lock_guard lock(mutex_);
      managed_ = false;
    }
    std::this_thread::sleep_for(kRetry);
  }
}

void Monitor::serve_scheduler() {
  schedd::Client client(schedd_);
  control::Envelope request;
  auto* registering = request.mutable_register_buffer();
  registering->set_protocol_version(control::VERSION_CURRENT);
  registering->set_address(advertise_);
  registering->set_capacity(store_.stats().capacity);
  const control::Envelope reply = client.call(request);
  if (!reply.has_buffer_registered())
    throw std::runtime_error("registration refused: " + reply.error().message());
  const double period = reply.buffer_registered().report_seconds();
  {
    std::lock_guard lock(mutex_);
    managed_ = true;
    order_ = reply.buffer_registered().order();
    acted_epoch_ = 0;
  }
  std::fprintf(stderr, "harmonia-bbd: buffer %u of the scheduler at %s\n",
               reply.buffer_registered().index(), schedd_.c_str());
  for (;;) {
    std::this_thread::sleep_for(std::chrono::duration<double>(period > 0 ? period : 0.1));
    control::Envelope report;
    auto* r = report.mutable_buffer_report();
    {
      // The epoch first: the snapshot after it holds every write the order's phases made.
      std::lock_guard lock(mutex_);
      r->set_order_epoch(acted_epoch_);
    }
    const StoreStats s = store_.stats();
    r->set_capacity(s.capacity);
    r->set_used(s.used);
    r->set_drained_bytes(s.drained);
    r->set_draining(s.draining);
    r->set_queue_depth(in_flight_.load());
    const auto list = [](const std::map<std::string, std::uint64_t>& by_job, auto* out) {
      for (const auto& [job, bytes] : by_job) {
        auto* entry = out->Add();
        entry->set_job(job);
        entry->set_bytes(bytes);
      }
    };
    list(s.held_by_job, r->mutable_held());
    list(s.drained_by_job, r->mutable_drained());
    client.send(report);
    // Pushed orders that came since the last report, then the reply (an order too).
    for (;;) {
      const control::Envelope in = client.receive();
      if (in.has_drain_order()) apply(in.drain_order());
      if (in.has_error())
        throw std::runtime_error("the scheduler refused a report: " + in.error().message());
      if (in.seq() != 0) break;
    }
  }
}

}  // namespace harmonia::bbd
