// harmonia-siteload: a site's buffer nodes and jobs against a real harmonia-schedd, over its
// Unix socket, to measure the scheduler at a site's size (docs/control.md, "Load at a site's
// size"). Each emulated buffer node registers and reports as harmonia-bbd's monitor does
// (RegisterBuffer, then a BufferReport every report period, acknowledging the drain orders it
// has carried out and listing the bytes it holds per job, drained at --drain-bw while ordered);
// each job is one process that behaves as libharmonia's agent does: it registers, heartbeats when
// silent, and per I/O phase sends PhaseBegin and waits for its grant, "writes" its bytes to the
// nodes granted (they then hold them), sends PhaseEnd, asks to flush and says when it is done.
// One thread, one epoll loop; every message is a real frame on a real connection.
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/frames.hpp"
#include "common/measure.hpp"
#include "common/unix_socket.hpp"
#include "control/client.hpp"
#include "control/control.pb.h"
#include "control/frame.hpp"

namespace {

namespace control = harmonia::control;
using harmonia::common::quantile;
constexpr auto now = harmonia::common::monotonic_now;

/// The decisions timed, from the request that needs one to the answer that carries it.
enum Decision {
  kNodeRegister,
  kReport,
  kRegister,
  kBegin,
  kGrant,
  kEnd,
  kFlushReply,
  kFlush,
  kDecisions
};
/// Their names in the results: "grant" is from PhaseBegin to the directive without await_grant
/// (the reply, or a push once the policy places the phase), "flush" from FlushRequest to a
/// directive that allows the flush; the others from a request to its reply.
const char* const kDecisionNames[kDecisions] = {"node_register", "report", "register",
                                                "phase_begin",   "grant",  "phase_end",
                                                "flush_request", "flush"};

struct Settings {
  std::string schedd;
  int nodes = 256, jobs = 2000, phases = 5;
  double compute = 2.0, io = 0.5, heartbeat = 0.25, drain_bw = 2e9, settle = 30;
  double phase_bytes = 256e6, capacity = 1e9;
  double progress = 1.0;
  unsigned seed = 1;
  std::string json;
};

struct Peer {
  int fd = -1;
  std::vector<std::uint8_t> input;
  std::uint64_t next_seq = 1;
  double last_sent = 0;
  /// Requests sent and not answered yet, by seq: when, and which decision they wait for (-1:
  /// none timed, a heartbeat or a FlushDone).
  std::unordered_map<std::uint64_t, std::pair<double, int>> pending;
};

struct Node {
  Peer peer;
  std::string address;
  bool registered = false;
  control::DrainOrder order;
  std::uint64_t acted_epoch = 0;  ///< the last order carried out (all its drains done)
  std::uint64_t acked_epoch = 0;  ///< the last acted epoch a report the scheduler answered held
  std::map<std::string, std::uint64_t> held, drained;
  std::uint64_t drained_bytes = 0;
  double drained_at = 0;
  bool first_report = true;
  std::uint64_t report_epoch = 0;  ///< the acted epoch of the report in flight
  bool dropped = false;            ///< the scheduler closed its connection
};

struct Job {
  Peer peer;
  enum class Step {
    Registering,
    Computing,
    Beginning,
    AwaitGrant,
    Writing,
    Ending,
    Flushing,
    Leaving,
    Done
  };
  Step step = Step::Registering;
  int phase = 0;
  double begin_sent = 0, flush_sent = 0;
  std::uint64_t awaited = 0;  ///< the seq of the PhaseBegin, PhaseEnd or FlushRequest sent
  bool flush_answered = false;
  control::Directive directive;
};

struct Timer {
  double at;
  bool node;
  size_t index;
  bool operator>(const Timer& other) const { return at > other.at; }
};

class SiteLoad {
 public:
  explicit SiteLoad(Settings settings) : s_(std::move(settings)), random_(s_.seed) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    nodes_.resize(static_cast<size_t>(s_.nodes));
    jobs_.resize(static_cast<size_t>(s_.jobs));
  }

  nlohmann::json run() {
    daemon_pid_ = peer_pid(control::Client(s_.schedd).fd());
    const double start = now();
    // The nodes first, as a site starts its buffer nodes before jobs come.
    for (size_t n = 0; n < nodes_.size(); ++n) {
      Node& node = nodes_[n];
      node.peer.fd = connect(s_.schedd);
      watch(node.peer.fd, n + 1);
      node.address = "10." + std::to_string(n / 256) + "." + std::to_string(n % 256) + ".1:7001";
      node_by_address_[node.address] = n;
      control::Envelope e;
      auto* reg = e.mutable_register_buffer();
      reg->set_protocol_version(control::VERSION_CURRENT);
      reg->set_address(node.address);
      reg->set_capacity(static_cast<std::uint64_t>(s_.capacity));
      send(node.peer, e, kNodeRegister);
    }
    wait_for([&] { return nodes_registered_ == nodes_.size(); }, "the nodes' registrations");
    // Then every job's process registers, all at once (a site's running jobs when the
    // scheduler starts), and each runs its phases after a random first compute time.
    for (size_t j = 0; j < jobs_.size(); ++j) {
      Job& job = jobs_[j];
      job.peer.fd = connect(s_.schedd);
      watch(job.peer.fd, kJobKey + j);
      control::Envelope e;
      auto* reg = e.mutable_register_process();
      reg->set_protocol_version(control::VERSION_CURRENT);
      reg->set_job("siteload-" + std::to_string(j));
      reg->set_name("siteload");
      reg->set_ranks(1);
      reg->set_bytes_per_process(s_.phase_bytes);
      reg->set_pid(static_cast<std::uint32_t>(getpid()));
      reg->set_host("siteload");
      send(job.peer, e, kRegister);
    }
    wait_for([&] { return jobs_registered_ == jobs_.size(); }, "the jobs' registrations");
    const Snapshot before = snapshot();
    const double cpu_before = daemon_cpu();
    const double phases_start = now();
    std::uniform_real_distribution<double> first(0, s_.compute);
    for (size_t j = 0; j < jobs_.size(); ++j)
      timers_.push({phases_start + first(random_), false, j});
    next_progress_ = phases_start + s_.progress;
    while (jobs_done_ < jobs_.size()) poll_once();
    const double phases_end = now();
    const double cpu = daemon_cpu() - cpu_before;
    const Snapshot after = snapshot();
    // The jobs are gone: their data drains. The nodes report until every order is carried out
    // and acknowledged, or --settle seconds have passed.
    const double settle_until = now() + s_.settle;
    while (!settled() && now() < settle_until) poll_once();
    const double end = now();
    const std::uint64_t peak = daemon_memory("VmHWM:");
    for (auto& node : nodes_)
      if (node.peer.fd >= 0) close(node.peer.fd);
    for (auto& job : jobs_)
      if (job.peer.fd >= 0) close(job.peer.fd);
    return report(before, after, phases_end - phases_start, end - start, peak, cpu);
  }

 private:
  static constexpr size_t kJobKey = 1U << 20;  ///< epoll keys: nodes 1..N, jobs from here

  struct Snapshot {
    std::uint64_t requests = 0, pushes = 0;
  };

  int connect(const std::string& address) {
    const int fd = harmonia::common::connect_unix(address, close);
    if (fd < 0) throw std::runtime_error(address + ": cannot connect");
    return fd;
  }

  void watch(int fd, size_t key) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = key;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0)
      throw std::runtime_error("epoll_ctl failed");
  }

  static pid_t peer_pid(int fd) {
    ucred cred{};
    socklen_t length = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return 0;
    return cred.pid;
  }

  /// A field of /proc/PID/status of the daemon, in bytes (0 when it cannot be read).
  std::uint64_t daemon_memory(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(daemon_pid_) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
    return 0;
  }

  /// The daemon's CPU time so far (user and system), seconds.
  double daemon_cpu() const {
    std::ifstream in("/proc/" + std::to_string(daemon_pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto after_name = text.rfind(')');
    if (after_name == std::string::npos) return 0;
    std::istringstream fields(text.substr(after_name + 2));
    std::string field;
    double ticks = 0;
    // After the name: state (3) ... utime (14), stime (15).
    for (int k = 3; k <= 15 && fields >> field; ++k)
      if (k >= 14) ticks += std::stod(field);
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  /// The scheduler's request and push counts, over a connection of its own (a silent one would
  /// be dropped after a lease).
  Snapshot snapshot() const {
    control::Client client(s_.schedd);
    control::Envelope request;
    request.mutable_status_request();
    const control::Envelope reply = client.call(request);
    // This StatusRequest is one of the requests counted; its reply lists every job.
    return {reply.status().requests() - 1, reply.status().pushes()};
  }

  template <class Done>
  void wait_for(Done done, const std::string& what) {
    const double deadline = now() + 60;
    while (!done()) {
      if (now() > deadline) throw std::runtime_error(what + " not answered within 60 s");
      poll_once();
    }
  }

  /// Sends `message` as the peer's next request; its seq.
  std::uint64_t send(Peer& peer, control::Envelope message, int decision) {
    const std::uint64_t seq = peer.next_seq++;
    message.set_seq(seq);
    std::string frame;
    harmonia::common::append_frame(frame, message);
    // The clock before the send: the scheduler may answer before send() returns.
    peer.last_sent = now();
    // A connection the scheduler closed is found by the next read, and counted as dropped.
    (void)harmonia::common::send_all(peer.fd, frame);
    peer.pending[seq] = {peer.last_sent, decision};
    return seq;
  }

  void poll_once() {
    double until = now() + 0.05;
    if (!timers_.empty()) until = std::min(until, timers_.top().at);
    epoll_event events[512];
    const int n =
        epoll_wait(epoll_, events, 512, static_cast<int>(std::max(0.0, until - now()) * 1000));
    for (int i = 0; i < n; ++i) receive(events[i].data.u64);
    const double t = now();
    while (!timers_.empty() && timers_.top().at <= t) {
      const Timer timer = timers_.top();
      timers_.pop();
      if (timer.node)
        report(timer.index);
      else
        act(timer.index);
    }
    if (t >= next_heartbeat_) {
      // As libharmonia's agent: a heartbeat when nothing was sent for a while.
      for (auto& job : jobs_)
        if (job.step != Job::Step::Done && job.step != Job::Step::Registering &&
            job.step != Job::Step::Leaving && t - job.peer.last_sent > s_.heartbeat) {
          control::Envelope e;
          e.mutable_heartbeat();
          send(job.peer, e, -1);
        }
      next_heartbeat_ = t + s_.heartbeat / 4;
    }
    if (s_.progress > 0 && t >= next_progress_) {
      show_progress(t);
      next_progress_ = t + s_.progress;
    }
  }

  void show_progress(double t) {
    size_t waiting = 0, writing = 0;
    for (const auto& job : jobs_) {
      waiting += job.step == Job::Step::AwaitGrant;
      writing += job.step == Job::Step::Writing;
    }
    const double rate =
        static_cast<double>(received_ - progress_received_) / std::max(1e-9, t - progress_at_);
    progress_received_ = received_;
    progress_at_ = t;
    std::fprintf(stderr,
                 "siteload: %zu/%zu phases done, %zu waiting for a grant, %zu writing, %zu/%zu "
                 "jobs done; %.0f messages/s received; scheduler RSS %.1f MiB\n",
                 phases_done_, jobs_.size() * static_cast<size_t>(s_.phases), waiting, writing,
                 jobs_done_, jobs_.size(), rate,
                 static_cast<double>(daemon_memory("VmRSS:")) / (1 << 20));
  }

  void receive(std::uint64_t key) {
    const bool is_node = key < kJobKey;
    const size_t index = is_node ? key - 1 : key - kJobKey;
    Peer& peer = is_node ? nodes_[index].peer : jobs_[index].peer;
    std::uint8_t chunk[65536];
    const ssize_t n = recv(peer.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      // The scheduler dropped it (a lease missed while it was too busy to read, say): counted,
      // and the node or job is gone.
      if (is_node) {
        ++nodes_dropped_;
        close(peer.fd);
        nodes_[index].dropped = true;
        nodes_[index].peer = Peer{};
      } else {
        ++jobs_dropped_;
        finish(jobs_[index]);
      }
      return;
    }
    if (n < 0) return;
    const double t = now();
    peer.input.insert(peer.input.end(), chunk, chunk + n);
    size_t used = 0;
    for (;;) {
      const auto scan = control::scan_frame(peer.input.data() + used, peer.input.size() - used,
                                            control::kMaxReplyBytes);
      if (scan.kind != control::FrameScan::Kind::Frame) break;
      control::Envelope message;
      message.ParseFromArray(peer.input.data() + used + control::kHeaderBytes,
                             static_cast<int>(scan.body_length));
      used += control::kHeaderBytes + scan.body_length;
      ++received_;
      if (message.seq() != 0) {
        const auto sent = peer.pending.find(message.seq());
        if (sent != peer.pending.end()) {
          if (sent->second.second >= 0 && !message.has_error())
            latency_[static_cast<size_t>(sent->second.second)].push_back(t - sent->second.first);
          peer.pending.erase(sent);
        }
      }
      if (message.has_error()) {
        ++refusals_;
        if (refusal_messages_.size() < 10) refusal_messages_.push_back(message.error().message());
        if (!is_node) {
          finish(jobs_[index]);  // the job gives up (its connection closes)
          return;
        }
        continue;
      }
      if (is_node)
        on_node_message(index, message, t);
      else
        on_job_message(index, message, t);
      if (!is_node && jobs_[index].step == Job::Step::Done) return;  // closed
    }
    peer.input.erase(peer.input.begin(), peer.input.begin() + static_cast<long>(used));
  }

  // The buffer nodes.

  void on_node_message(size_t n, const control::Envelope& message, double t) {
    Node& node = nodes_[n];
    if (message.has_buffer_registered()) {
      node.registered = true;
      ++nodes_registered_;
      report_seconds_ = message.buffer_registered().report_seconds();
      apply(node, message.buffer_registered().order());
      node.drained_at = t;
      timers_.push({t + report_seconds_, true, n});
      return;
    }
    if (!message.has_drain_order()) return;
    ++orders_received_;
    apply(node, message.drain_order());
    if (message.seq() != 0) node.acked_epoch = node.report_epoch;  // the report's answer
  }

  void apply(Node& node, const control::DrainOrder& order) {
    if (order.epoch() >= node.order.epoch()) node.order = order;
  }

  /// Drains what the order names at --drain-bw since the last call; the order is carried out
  /// once nothing of its jobs is held.
  void drain(Node& node, double t) {
    double budget = s_.drain_bw * (t - node.drained_at);
    node.drained_at = t;
    bool left = false;
    if (node.order.drain())
      for (const auto& job : node.order.jobs()) {
        const auto held = node.held.find(job);
        if (held == node.held.end()) continue;
        const auto bytes = std::min(held->second, static_cast<std::uint64_t>(budget));
        budget -= static_cast<double>(bytes);
        held->second -= bytes;
        node.drained[job] += bytes;
        node.drained_bytes += bytes;
        if (held->second > 0)
          left = true;
        else
          node.held.erase(held);
      }
    if (!left) node.acted_epoch = node.order.epoch();
  }

  void report(size_t n) {
    Node& node = nodes_[n];
    if (node.dropped) return;
    const double t = now();
    timers_.push({t + report_seconds_, true, n});
    if (!node.peer.pending.empty()) return;  // as the monitor: one report at a time
    drain(node, t);
    control::Envelope e;
    auto* r = e.mutable_buffer_report();
    std::uint64_t used = 0;
    for (const auto& [job, bytes] : node.held) {
      used += bytes;
      auto* held = r->add_held();
      held->set_job(job);
      held->set_bytes(bytes);
    }
    for (const auto& [job, bytes] : node.drained) {
      auto* drained = r->add_drained();
      drained->set_job(job);
      drained->set_bytes(bytes);
    }
    r->set_capacity(static_cast<std::uint64_t>(s_.capacity));
    r->set_used(used);
    r->set_drained_bytes(node.drained_bytes);
    r->set_draining(node.order.drain() && used > 0);
    r->set_order_epoch(node.acted_epoch);
    r->set_files_complete(node.first_report);
    node.first_report = false;
    node.report_epoch = node.acted_epoch;
    send(node.peer, e, kReport);
  }

  bool settled() {
    for (size_t n = 0; n < nodes_.size(); ++n)
      if (!nodes_[n].dropped && (nodes_[n].acked_epoch != nodes_[n].order.epoch() ||
                                 !nodes_[n].held.empty() || !nodes_[n].peer.pending.empty()))
        return false;
    return true;
  }

  // The jobs.

  void act(size_t j) {
    Job& job = jobs_[j];
    if (job.step == Job::Step::Computing) {
      job.step = Job::Step::Beginning;
      job.begin_sent = now();
      control::Envelope e;
      e.mutable_phase_begin()->set_expected_bytes(static_cast<std::uint64_t>(s_.phase_bytes));
      job.awaited = send(job.peer, e, kBegin);
    } else if (job.step == Job::Step::Writing) {
      // The phase's bytes are on its nodes (round-robin stripes: an even share each) before
      // PhaseEnd, as a client's writes are answered before the phase ends.
      const auto& buffers = job.directive.buffers();
      for (const auto& address : buffers) {
        const auto found = node_by_address_.find(address);
        if (found == node_by_address_.end()) continue;
        nodes_[found->second].held[job.directive.job()] +=
            static_cast<std::uint64_t>(s_.phase_bytes / buffers.size());
      }
      job.step = Job::Step::Ending;
      control::Envelope e;
      e.mutable_phase_end()->set_bytes(static_cast<std::uint64_t>(s_.phase_bytes));
      job.awaited = send(job.peer, e, kEnd);
    }
  }

  void on_job_message(size_t j, const control::Envelope& message, double t) {
    Job& job = jobs_[j];
    const control::Directive* directive = nullptr;
    if (message.has_registered()) {
      directive = &message.registered().directive();
      if (job.step == Job::Step::Registering) {
        job.step = Job::Step::Computing;
        ++jobs_registered_;
      }
    } else if (message.has_directive()) {
      directive = &message.directive();
    }
    if (job.step == Job::Step::Leaving && job.peer.pending.empty()) {
      finish(job);  // the process exits: its connection closes, and the job ends with it
      return;
    }
    if (directive == nullptr) return;
    if (message.seq() == 0 && directive->epoch() < job.directive.epoch()) return;  // stale push
    job.directive = *directive;
    const bool answer = message.seq() != 0 && message.seq() == job.awaited;
    if (job.step == Job::Step::Beginning && answer) job.step = Job::Step::AwaitGrant;
    if (job.step == Job::Step::AwaitGrant && !job.directive.await_grant()) {
      latency_[kGrant].push_back(t - job.begin_sent);
      job.step = Job::Step::Writing;
      timers_.push({t + s_.io, false, j});
    } else if (job.step == Job::Step::Ending && answer) {
      // Out of its phase with data staged: it asks to flush (libharmonia's agent does so when
      // its phase ends with bytes still staged) and waits for its turn.
      job.step = Job::Step::Flushing;
      job.flush_sent = t;
      job.flush_answered = false;
      control::Envelope e;
      e.mutable_flush_request()->set_staged_bytes(static_cast<std::uint64_t>(s_.phase_bytes));
      job.awaited = send(job.peer, e, kFlushReply);
    } else if (job.step == Job::Step::Flushing) {
      job.flush_answered = job.flush_answered || answer;
      if (job.flush_answered && job.directive.flush_allowed()) flush_done(j, t);
    }
  }

  void flush_done(size_t j, double t) {
    Job& job = jobs_[j];
    latency_[kFlush].push_back(t - job.flush_sent);
    control::Envelope e;
    e.mutable_flush_done();
    send(job.peer, e, -1);
    ++phases_done_;
    if (++job.phase >= s_.phases) {
      job.step = Job::Step::Leaving;  // it exits once its last requests are answered
      return;
    }
    job.step = Job::Step::Computing;
    std::uniform_real_distribution<double> gap(0.5 * s_.compute, 1.5 * s_.compute);
    timers_.push({t + gap(random_), false, j});
  }

  void finish(Job& job) {
    if (job.step == Job::Step::Done) return;
    if (job.step == Job::Step::Registering) ++jobs_registered_;
    job.step = Job::Step::Done;
    ++jobs_done_;
    unanswered_ += job.peer.pending.size();
    close(job.peer.fd);
    job.peer = Peer{};
  }

  nlohmann::json report(const Snapshot& before, const Snapshot& after, double phases_seconds,
                        double seconds, std::uint64_t peak, double cpu) {
    nlohmann::json latency;
    for (int d = 0; d < kDecisions; ++d) {
      const auto& values = latency_[static_cast<size_t>(d)];
      latency[kDecisionNames[d]] = {{"count", values.size()},
                                    {"p50_ms", quantile(values, 0.5) * 1e3},
                                    {"p99_ms", quantile(values, 0.99) * 1e3},
                                    {"max_ms", quantile(values, 1.0) * 1e3}};
    }
    std::uint64_t unanswered = unanswered_, unacknowledged = 0, left = 0;
    for (const auto& node : nodes_) {
      unanswered += node.peer.pending.size();
      unacknowledged += node.acked_epoch != node.order.epoch();
      for (const auto& [job, bytes] : node.held) left += bytes;
    }
    const std::uint64_t requests = after.requests - before.requests;
    const std::uint64_t pushes = after.pushes - before.pushes;
    return {
        {"nodes", s_.nodes},
        {"jobs", s_.jobs},
        {"phases_per_job", s_.phases},
        {"phases_done", phases_done_},
        {"jobs_done", jobs_done_},
        {"seconds", seconds},
        {"phases_seconds", phases_seconds},
        {"scheduler_requests", requests},
        {"scheduler_pushes", pushes},
        {"requests_per_second", static_cast<double>(requests) / phases_seconds},
        {"messages_per_second", static_cast<double>(2 * requests + pushes) / phases_seconds},
        {"daemon_peak_rss_bytes", peak},
        {"daemon_cpu_seconds", cpu},
        {"daemon_cpu_us_per_request", requests > 0 ? cpu / static_cast<double>(requests) * 1e6 : 0},
        {"latency", latency},
        {"refusals", refusals_},
        {"jobs_dropped", jobs_dropped_},
        {"nodes_dropped", nodes_dropped_},
        {"refusal_messages", refusal_messages_},
        {"requests_unanswered", unanswered},
        {"orders_received", orders_received_},
        {"nodes_with_order_unacknowledged", unacknowledged},
        {"bytes_left_on_nodes", left},
    };
  }

  Settings s_;
  std::mt19937_64 random_;
  int epoll_ = -1;
  pid_t daemon_pid_ = 0;
  std::vector<Node> nodes_;
  std::vector<Job> jobs_;
  std::unordered_map<std::string, size_t> node_by_address_;
  double report_seconds_ = 0.1;
  size_t nodes_registered_ = 0, jobs_registered_ = 0, jobs_done_ = 0, phases_done_ = 0;
  std::uint64_t received_ = 0, unanswered_ = 0, jobs_dropped_ = 0, nodes_dropped_ = 0,
                orders_received_ = 0, refusals_ = 0;
  std::uint64_t progress_received_ = 0;
  double progress_at_ = now(), next_progress_ = 0, next_heartbeat_ = 0;
  std::vector<std::string> refusal_messages_;
  std::vector<double> latency_[kDecisions];
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "harmonia-siteload: a site's buffer nodes and jobs against a real harmonia-schedd; shows "
      "progress on stderr, prints a table of decision latencies, messages per second and the "
      "scheduler's peak memory"};
  Settings s;
  cli.add_option("--schedd", s.schedd, "harmonia-schedd's Unix socket")->required();
  cli.add_option("--nodes", s.nodes, "Buffer nodes to emulate (at most the daemon's --buffers)")
      ->check(CLI::Range(1, 4096));
  cli.add_option("--jobs", s.jobs, "Jobs running at once (one process each)")
      ->check(CLI::Range(1, 100000));
  cli.add_option("--phases", s.phases, "I/O phases per job")->check(CLI::Range(1, 10000));
  cli.add_option("--compute", s.compute,
                 "Mean seconds between a job's phases (each gap uniform in 0.5x to 1.5x)")
      ->check(CLI::Range(0.01, 3600.0));
  cli.add_option("--io", s.io, "Seconds a phase writes once granted")
      ->check(CLI::Range(0.0, 3600.0));
  cli.add_option("--phase-bytes", s.phase_bytes, "Bytes a job's phase declares and writes")
      ->check(CLI::Range(1.0, 1e15));
  cli.add_option("--capacity", s.capacity, "Bytes a node says it holds at most")
      ->check(CLI::Range(1.0, 1e18));
  cli.add_option("--drain-bw", s.drain_bw, "Bytes per second a node drains while ordered")
      ->check(CLI::Range(1.0, 1e15));
  cli.add_option("--heartbeat", s.heartbeat, "A job heartbeats when silent this many seconds")
      ->check(CLI::Range(0.01, 60.0));
  cli.add_option("--settle", s.settle,
                 "Seconds the nodes may take after the last job to drain and acknowledge")
      ->check(CLI::Range(0.0, 3600.0));
  cli.add_option("--progress", s.progress, "Seconds between progress lines (0: none)")
      ->check(CLI::Range(0.0, 3600.0));
  cli.add_option("--seed", s.seed, "Seed of the compute times");
  cli.add_option("--json", s.json, "Also write the results as JSON to this file");
  CLI11_PARSE(cli, argc, argv);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  try {
    SiteLoad load(s);
    const nlohmann::json results = load.run();
    std::printf(
        "%d nodes, %d jobs x %d phases: %.1f s, %.0f scheduler messages/s, %.1f us of scheduler "
        "CPU per request, peak RSS %.1f MiB\n",
        s.nodes, s.jobs, s.phases, results["seconds"].get<double>(),
        results["messages_per_second"].get<double>(),
        results["daemon_cpu_us_per_request"].get<double>(),
        static_cast<double>(results["daemon_peak_rss_bytes"].get<std::uint64_t>()) / (1 << 20));
    std::printf("%-14s %9s %10s %10s %10s\n", "decision", "count", "p50 ms", "p99 ms", "max ms");
    for (const auto& [name, row] : results["latency"].items())
      std::printf("%-14s %9zu %10.3f %10.3f %10.3f\n", name.c_str(),
                  row["count"].get<std::size_t>(), row["p50_ms"].get<double>(),
                  row["p99_ms"].get<double>(), row["max_ms"].get<double>());
    std::printf(
        "refusals %llu, connections dropped %llu, requests unanswered %llu, nodes with an order "
        "not acknowledged %llu, bytes left on the nodes %llu\n",
        results["refusals"].get<unsigned long long>(),
        results["jobs_dropped"].get<unsigned long long>() +
            results["nodes_dropped"].get<unsigned long long>(),
        results["requests_unanswered"].get<unsigned long long>(),
        results["nodes_with_order_unacknowledged"].get<unsigned long long>(),
        results["bytes_left_on_nodes"].get<unsigned long long>());
    if (!s.json.empty()) std::ofstream(s.json) << results.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harmonia-siteload: %s\n", e.what());
    return 1;
  }
}
