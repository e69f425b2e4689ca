#include "bbd/monitor.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "common/log.hpp"
#include "control/client.hpp"

namespace harmonia::bbd {

namespace {
/// The longest an idle drain or stage-in thread waits without an event (an order or a write
/// wakes it at once).
constexpr auto kIdle = std::chrono::seconds(1);
/// How long a client's close waits for the scheduler to take the node's report (well within
/// the client's own wait for the node's answer).
constexpr auto kPublishWait = std::chrono::seconds(2);
constexpr auto kRetry = std::chrono::milliseconds(500);
/// How often an idle node looks for fences it no longer needs (a directory listing on the PFS).
constexpr auto kFenceSweep = std::chrono::seconds(10);

/// A stage-in's name in the store and in staged_: its job and read phase.
std::string key_of(const control::StageIn& stage_in) {
  return stage_in.job() + '\n' + std::to_string(stage_in.phase());
}
}  // namespace

Monitor::Monitor(Store& store, std::string schedd, std::string advertise, double threshold,
                 const std::atomic<unsigned>& in_flight)
    : store_(store),
      schedd_(std::move(schedd)),
      advertise_(std::move(advertise)),
      threshold_(threshold),
      in_flight_(in_flight),
      report_wanted_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (report_wanted_fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "eventfd for the report thread");
}

Monitor::~Monitor() { close(report_wanted_fd_); }

void Monitor::start() {
  store_.on_write([this] { wake(); });
  std::thread([this] { drain_loop(); }).detach();
  if (schedd_.empty()) return;
  std::thread([this] { report_loop(); }).detach();
  std::thread([this] { stage_loop(); }).detach();
}

bool Monitor::ordered(const control::StageIn& stage_in) {
  std::lock_guard lock(mutex_);
  return ordered_locked(stage_in);
}

bool Monitor::ordered_locked(const control::StageIn& stage_in) const {
  const std::string wanted = stage_in.SerializeAsString();
  for (const auto& listed : order_.stage_in())
    if (listed.job() == stage_in.job() && listed.phase() == stage_in.phase())
      return listed.SerializeAsString() == wanted;
  return false;
}

void Monitor::stage_loop() {
  for (;;) {
    control::DrainOrder order;
    {
      std::lock_guard lock(mutex_);
      order = order_;
    }
    // Copies no order lists any more (or lists changed) are dropped: their space is free.
    std::map<std::string, std::string> wanted;
    for (const auto& stage_in : order.stage_in())
      wanted[key_of(stage_in)] = stage_in.SerializeAsString();
    std::vector<std::string> gone;
    {
      std::lock_guard lock(mutex_);
      for (auto it = staged_.begin(); it != staged_.end();) {
        const auto listed = wanted.find(it->first);
        if (listed != wanted.end() && listed->second == it->second.ordered) {
          ++it;
          continue;
        }
        gone.push_back(it->first);
        it = staged_.erase(it);
      }
    }
    for (const auto& key : gone) store_.drop_stage_in(key);
    // The first stage-in not done yet, if any (one at a time, in the order's order).
    const control::StageIn* next = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (const auto& stage_in : order.stage_in())
        if (!staged_.count(key_of(stage_in))) {
          next = &stage_in;
          break;
        }
    }
    if (next) {
      stage(*next);
    } else {
      std::unique_lock lock(mutex_);
      const std::uint64_t seen = work_events_;
      work_.wait_for(lock, kIdle, [&] { return work_events_ != seen; });
    }
  }
}

void Monitor::stage(const control::StageIn& stage_in) {
  const std::string key = key_of(stage_in);
  const StageSpec spec{key,
                       static_cast<uid_t>(stage_in.uid()),
                       static_cast<gid_t>(stage_in.gid()),
                       stage_in.stripe_bytes(),
                       stage_in.stripe_index(),
                       stage_in.stripe_count()};
  const auto keep_going = [&] { return ordered(stage_in); };
  std::vector<std::string> failed;
  std::set<std::string> done;
  for (const auto& file : stage_in.files()) {
    if (!done.insert(file).second) continue;  // listed twice: copied once
    if (!keep_going()) break;
    std::uint64_t bytes = 0;
    std::string why;
    if (store_.stage_in(spec, file, keep_going, bytes, why) != Status::Ok) {
      common::log::warning(
          "stage-in of read phase " + std::to_string(stage_in.phase()) + ": " + why,
          {stage_in.job(), static_cast<uid_t>(stage_in.uid()), advertise_});
      failed.push_back(file);
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (ordered_locked(stage_in)) {
      staged_[key] = {stage_in.SerializeAsString(), std::move(failed)};
      return;
    }
  }
  // The order dropped or changed it meanwhile: what was copied goes.
  store_.drop_stage_in(key);
}

bool Monitor::drain_urgent(const control::DrainOrder& order) {
  bool dealt = false;
  for (const auto& urgent : order.urgent()) {
    {
      std::lock_guard lock(mutex_);
      if (urgent_done_.count(urgent.id()) || urgent_reported_.count(urgent.id())) continue;
    }
    const FileRef file{urgent.name(), urgent.inode()};
    std::string why;
    // Not held here (drained since, or never here): nothing to drain, done at once.
    if (store_.holds(file) && store_.drain(file, why) != Status::Ok) {
      log_drain_failure("urgent drain of " + urgent.name() + ": " + why, file);
      continue;  // tried again at the next turn; the caller waits for it
    }
    std::lock_guard lock(mutex_);
    urgent_done_.insert(urgent.id());
    dealt = true;
  }
  return dealt;
}

void Monitor::wake() {
  std::lock_guard lock(mutex_);
  ++work_events_;
  work_.notify_all();
}

void Monitor::report_soon() {
  {
    std::lock_guard lock(mutex_);
    ++reports_wanted_;
  }
  const std::uint64_t one = 1;
  (void)!write(report_wanted_fd_, &one, sizeof(one));
}

bool Monitor::publish(std::string& why) {
  std::unique_lock lock(mutex_);
  if (!managed_) {
    why = "not connected to the scheduler " + schedd_;
    return false;
  }
  const std::uint64_t mine = ++reports_wanted_;
  const std::uint64_t one = 1;
  (void)!write(report_wanted_fd_, &one, sizeof(one));
  if (!acked_.wait_for(lock, kPublishWait, [&] { return reports_acked_ >= mine || !managed_; }) ||
      reports_acked_ < mine) {
    why = "the scheduler " + schedd_ + " did not take the node's report";
    return false;
  }
  return true;
}

void Monitor::log_drain_failure(const std::string& line, const FileRef& file) {
  const auto writer = store_.writer_of(file);
  common::log::warning(
      line, {writer ? writer->job : "", writer ? std::optional<uid_t>(writer->uid) : std::nullopt,
             advertise_});
}

void Monitor::drain_loop() {
  auto next_fence_sweep = std::chrono::steady_clock::now() + kFenceSweep;
  bool past_threshold = false;
  for (;;) {
    control::DrainOrder order;
    bool managed = false;
    {
      std::lock_guard lock(mutex_);
      order = order_;
      managed = managed_;
    }
    // Files processes wait for come first, whatever their job; the scheduler hears at once.
    if (managed && drain_urgent(order)) {
      report_soon();
      continue;
    }
    std::set<std::string> jobs;
    if (managed && order.drain()) jobs.insert(order.jobs().begin(), order.jobs().end());
    if (!managed) {
      // Past the threshold the node drains all it holds, written meanwhile too, and only then
      // waits for the threshold again (a file half drained would otherwise sit below it).
      const StoreStats s = store_.stats();
      if (s.used == 0)
        past_threshold = false;
      else if (threshold_ < 1.0 &&
               static_cast<double>(s.used) >= threshold_ * static_cast<double>(s.capacity))
        past_threshold = true;
      if (past_threshold)
        for (const auto& held : s.held_by_job) jobs.insert(held.first);
    }
    std::string file, why;
    Status status = Status::Error;
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(mutex_);
      seen = work_events_;
    }
    try {
      status = store_.drain_next(jobs, file, why);
    } catch (const std::exception& error) {  // a scheduler's protocol check: never fatal here
      why = error.what();
    }
    if (status == Status::Ok) {
      report_soon();  // the scheduler learns of the drained bytes and files at once
    } else if (status == Status::NotHeld) {
      if (std::chrono::steady_clock::now() >= next_fence_sweep) {
        store_.drop_stale_fences();
        next_fence_sweep = std::chrono::steady_clock::now() + kFenceSweep;
      }
      // Nothing to drain: wait for an order or a write (or, unmanaged, the time to look at the
      // threshold again), not a polling period.
      std::unique_lock lock(mutex_);
      if (managed) acted_epoch_ = order.epoch();
      work_.wait_until(lock, std::min(next_fence_sweep, std::chrono::steady_clock::now() + kIdle),
                       [&] { return work_events_ != seen; });
    } else {
      log_drain_failure("drain of " + file + ": " + why, FileRef(file));
      std::this_thread::sleep_for(kRetry);
    }
  }
}

void Monitor::apply(const control::DrainOrder& order) {
  std::lock_guard lock(mutex_);
  if (order.epoch() >= order_.epoch() || !managed_) order_ = order;
  // Urgent files the order no longer lists are settled: forget that they were reported.
  std::set<std::uint64_t> listed;
  for (const auto& urgent : order_.urgent()) listed.insert(urgent.id());
  std::erase_if(urgent_reported_, [&](std::uint64_t inode) { return !listed.count(inode); });
  ++work_events_;
  work_.notify_all();
}

void Monitor::await_report(control::Client& client, std::chrono::duration<double> every) {
  const auto due = std::chrono::steady_clock::now() + every;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (reports_wanted_ > reports_acked_) return;
    }
    const auto left = due - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    pollfd polled[2] = {{client.fd(), POLLIN, 0}, {report_wanted_fd_, POLLIN, 0}};
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    if (poll(polled, 2, static_cast<int>(ms)) < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll of the scheduler");
    if (polled[1].revents & POLLIN) {
      std::uint64_t count = 0;
      (void)!read(report_wanted_fd_, &count, sizeof(count));
    }
    if (polled[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      // Between reports the scheduler only pushes: its orders, applied at once.
      const control::Envelope in = client.receive();
      if (in.has_drain_order()) apply(in.drain_order());
      if (in.has_error())
        throw std::runtime_error("the scheduler sent an error: " + in.error().message());
    }
  }
}

void Monitor::report_loop() {
  bool warned = false;
  for (;;) {
    try {
      serve_scheduler();
    } catch (const std::exception& error) {
      if (!warned)
        common::log::warning("scheduler " + schedd_ + ": " + error.what() +
                                 "; draining at the threshold until it is back",
                             {"", std::nullopt, advertise_});
      warned = true;
    }
    {
      std::lock_guard lock(mutex_);
      managed_ = false;
      acked_.notify_all();  // a publish waiting for this connection fails at once
    }
    std::this_thread::sleep_for(kRetry);
  }
}

void Monitor::serve_scheduler() {
  control::Client client(schedd_);
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
  common::log::info("buffer " + std::to_string(reply.buffer_registered().index()) +
                        " of the scheduler at " + schedd_,
                    {"", std::nullopt, advertise_});
  const auto every = std::chrono::duration<double>(period > 0 ? period : 0.1);
  for (bool first = true;; first = false) {
    std::uint64_t answers = 0;  // the reports asked for that this one answers
    control::Envelope report;
    auto* r = report.mutable_buffer_report();
    std::vector<std::pair<control::StageIn, std::vector<std::string>>> finished;
    if (!first) await_report(client, every);
    {
      // The epoch first: the snapshot after it holds every write the order's phases made.
      std::unique_lock lock(mutex_);
      answers = reports_wanted_;
      r->set_order_epoch(acted_epoch_);
      // The stage-ins finished, before the snapshot: only this thread changes the order, so
      // their copies are in the snapshot unless a write dropped them.
      for (const auto& stage_in : order_.stage_in()) {
        const auto done = staged_.find(key_of(stage_in));
        if (done != staged_.end() && done->second.ordered == stage_in.SerializeAsString())
          finished.emplace_back(stage_in, done->second.failed);
      }
    }
    const StoreStats s = store_.stats();
    for (const auto& [stage_in, failed] : finished) {
      auto* entry = r->add_staged_in();
      entry->set_job(stage_in.job());
      entry->set_phase(stage_in.phase());
      const auto by_key = s.staged_by_key.find(key_of(stage_in));
      const std::map<std::string, std::uint64_t> none;
      const auto& held = by_key == s.staged_by_key.end() ? none : by_key->second;
      std::uint64_t bytes = 0;
      std::set<std::string> listed;
      for (const auto& file : failed) {
        entry->add_failed(file);
        listed.insert(file);
      }
      for (const auto& file : stage_in.files()) {
        if (!listed.insert(file).second) continue;  // failed, or named twice
        const auto copy = held.find(file);
        if (copy != held.end())
          bytes += copy->second;
        else  // dropped since (a write of the file)
          entry->add_failed(file);
      }
      entry->set_bytes(bytes);
    }
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
    // The files held: every one in the first report of a connection, then what changed.
    const HeldFileChanges files = store_.take_file_changes(first);
    r->set_files_complete(first);
    for (const HeldFileState& held : files.held) {
      auto* entry = r->add_files();
      entry->set_inode(held.inode);
      entry->set_name(held.name);
      entry->set_end(held.end);
      entry->set_mtime_ns(held.mtime_ns);
      entry->set_uid(held.uid);
      entry->set_handle(held.handle);
    }
    for (const std::uint64_t inode : files.released) r->add_released(inode);
    {
      std::lock_guard lock(mutex_);
      for (const std::uint64_t id : urgent_done_) r->add_urgent_done(id);
      urgent_reported_.insert(urgent_done_.begin(), urgent_done_.end());
      urgent_done_.clear();
    }
    client.send(report);
    // Pushed orders that came since the last report, then the reply (an order too).
    for (;;) {
      const control::Envelope in = client.receive();
      if (in.has_drain_order()) apply(in.drain_order());
      if (in.has_error())
        throw std::runtime_error("the scheduler refused a report: " + in.error().message());
      if (in.seq() != 0) break;
    }
    std::lock_guard lock(mutex_);
    reports_acked_ = std::max(reports_acked_, answers);
    acked_.notify_all();
  }
}

}  // namespace harmonia::bbd
