// harmonia-agentload: emulates the ranks of one large job against a real harmonia-schedd, either
// each rank speaking to it directly or through node agents (harmonia-agentd), and measures what
// the scheduler sees per I/O phase (docs/node-agent.md, docs/benchmarks.md). 1,024 MPI processes
// do not fit a 2-core machine; 1,024 connections that behave as libharmonia's agent does do:
// register, heartbeat when silent for 0.25 s, and per phase send PhaseBegin (waiting for its
// reply, as the agent does before the phase's first write) and later PhaseEnd.
//
// A second job of one rank, direct, runs its phases half an I/O phase ahead of the large job's,
// so that the coordination strategy changes the large job's directive in the middle of each of
// its phases and the pushes (fan-out) are measured too.
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/frames.hpp"
#include "common/measure.hpp"
#include "common/unix_socket.hpp"
#include "control/control.pb.h"
#include "control/frame.hpp"

namespace {

namespace control = harmonia::control;
using harmonia::common::quantile;
constexpr auto now = harmonia::common::monotonic_now;

/// One request and its reply on a blocking socket (the status snapshots).
control::Envelope round_trip(int fd, const control::Envelope& request) {
  std::string frame;
  harmonia::common::append_frame(frame, request);
  if (!harmonia::common::send_all(fd, frame)) throw std::runtime_error("send: scheduler gone");
  std::vector<std::uint8_t> input;
  for (;;) {
    std::uint8_t chunk[65536];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) throw std::runtime_error("recv: scheduler gone");
    input.insert(input.end(), chunk, chunk + n);
    const auto scan = control::scan_frame(input.data(), input.size(), control::kMaxReplyBytes);
    if (scan.kind != control::FrameScan::Kind::Frame) continue;
    control::Envelope reply;
    reply.ParseFromArray(input.data() + control::kHeaderBytes, static_cast<int>(scan.body_length));
    return reply;
  }
}

struct Snapshot {
  std::uint64_t requests = 0, pushes = 0;
};

Snapshot snapshot(const std::string& schedd) {
  const int fd = harmonia::common::connect_unix(schedd, close);
  if (fd < 0) throw std::runtime_error(schedd + ": cannot connect for a status snapshot");
  control::Envelope request;
  request.set_seq(1);
  request.mutable_status_request();
  const auto reply = round_trip(fd, request);
  close(fd);
  // This StatusRequest is one of the requests counted: it is not the job's.
  return {reply.status().requests() - 1, reply.status().pushes()};
}

struct Rank {
  int fd = -1;
  bool small = false;  ///< the one-rank job out of step
  std::vector<std::uint8_t> input;
  std::uint64_t next_seq = 1;
  std::uint64_t begin_seq = 0, end_seq = 0;
  double begin_sent = 0, end_sent = 0, last_sent = 0;
  bool registered = false;
  int phase = 0;          ///< the phase being run or next
  bool in_phase = false;  ///< between PhaseBegin's send and PhaseEnd's
  double base = 0;        ///< when its phase loop starts: phase k begins compute + k periods on
  std::uint64_t requests = 0, replies = 0, pushes = 0;
  std::vector<double> push_times;
};

struct Timer {
  double at;
  size_t rank;
  bool operator>(const Timer& other) const { return at > other.at; }
};

class Load {
 public:
  Load(std::string schedd, std::vector<std::string> agents, int ranks, int phases, double compute,
       double io, double jitter, unsigned seed, std::string job)
      : schedd_(std::move(schedd)),
        agents_(std::move(agents)),
        ranks_(ranks),
        phases_(phases),
        compute_(compute),
        io_(io),
        jitter_(jitter),
        random_(seed),
        job_(std::move(job)) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
  }

  nlohmann::json run() {
    // MPI_Init: every rank connects and registers before the first phase.
    for (int r = 0; r <= ranks_; ++r) {
      Rank rank;
      rank.small = r == ranks_;
      const std::string& target =
          rank.small || agents_.empty()
              ? schedd_
              : agents_[static_cast<size_t>(r) * agents_.size() / static_cast<size_t>(ranks_)];
      rank.fd = harmonia::common::connect_unix(target, close);
      if (rank.fd < 0)
        throw std::runtime_error(target + ": cannot connect (rank " + std::to_string(r) + ")");
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u64 = static_cast<std::uint64_t>(r);
      epoll_ctl(epoll_, EPOLL_CTL_ADD, rank.fd, &event);
      control::Envelope e;
      auto* reg = e.mutable_register_process();
      reg->set_protocol_version(1);
      reg->set_job(rank.small ? job_ + "-other" : job_);
      reg->set_name(rank.small ? "other" : "large");
      reg->set_rank(rank.small ? 0 : static_cast<std::uint32_t>(r));
      reg->set_ranks(rank.small ? 1 : static_cast<std::uint32_t>(ranks_));
      reg->set_pid(static_cast<std::uint32_t>(getpid()));
      ranks_list_.push_back(std::move(rank));
      send(static_cast<size_t>(r), e);
    }
    const double deadline = now() + 30;
    while (registered_ < ranks_list_.size()) {
      if (now() > deadline) throw std::runtime_error("registrations not answered within 30 s");
      poll_once(now() + 0.05);
    }
    const Snapshot before = snapshot(schedd_);
    const double start = now() + 0.2;
    std::uniform_real_distribution<double> skew(0, jitter_);
    for (size_t r = 0; r < ranks_list_.size(); ++r) {
      // The other job's phase begins half an I/O phase before the large job's and ends in its
      // middle: the large job begins second (under 2a it stages) and its directive changes when
      // the other's phase ends, which is pushed to every one of its ranks.
      ranks_list_[r].base = start + (ranks_list_[r].small ? -io_ / 2 : 0);
      timers_.push({ranks_list_[r].base + compute_ + skew(random_), r});
    }
    running_ = ranks_list_.size();
    while (running_ > 0) poll_once(timers_.empty() ? now() + 0.05 : timers_.top().at);
    const double finished = now();
    const Snapshot after = snapshot(schedd_);
    for (auto& rank : ranks_list_) close(rank.fd);
    return report(before, after, finished - start);
  }

 private:
  void send(size_t r, control::Envelope message) {
    Rank& rank = ranks_list_[r];
    message.set_seq(rank.next_seq++);
    std::string frame;
    harmonia::common::append_frame(frame, message);
    // The clock before the send: the scheduler may answer before send() returns.
    rank.last_sent = now();
    if (!harmonia::common::send_all(rank.fd, frame))
      throw std::runtime_error("rank " + std::to_string(r) + ": connection lost");
    ++rank.requests;
    if (message.has_phase_begin()) {
      rank.begin_seq = message.seq();
      rank.begin_sent = rank.last_sent;
    } else if (message.has_phase_end()) {
      rank.end_seq = message.seq();
      rank.end_sent = rank.last_sent;
    }
  }

  void poll_once(double until) {
    epoll_event events[256];
    const int wait =
        static_cast<int>(std::max(0.0, std::min(until, next_heartbeat_) - now()) * 1000);
    const int n = epoll_wait(epoll_, events, 256, wait);
    for (int i = 0; i < n; ++i) receive(static_cast<size_t>(events[i].data.u64));
    const double t = now();
    while (!timers_.empty() && timers_.top().at <= t) {
      const Timer timer = timers_.top();
      timers_.pop();
      act(timer.rank);
    }
    if (t >= next_heartbeat_) {
      // As libharmonia's agent: a heartbeat when nothing was sent for 0.25 s.
      for (size_t r = 0; r < ranks_list_.size(); ++r)
        if (ranks_list_[r].registered && t - ranks_list_[r].last_sent > 0.25) {
          control::Envelope e;
          e.mutable_heartbeat();
          send(r, e);
        }
      next_heartbeat_ = t + 0.05;
    }
  }

  /// The rank's next step of its phase loop.
  void act(size_t r) {
    Rank& rank = ranks_list_[r];
    if (!rank.in_phase) {
      if (rank.phase >= phases_) return;
      rank.in_phase = true;
      control::Envelope e;
      e.mutable_phase_begin()->set_expected_bytes(1 << 20);
      send(r, e);
      return;  // the end is planned once the begin is answered
    }
    control::Envelope e;
    e.mutable_phase_end();
    send(r, e);
  }

  void receive(size_t r) {
    Rank& rank = ranks_list_[r];
    std::uint8_t chunk[65536];
    const ssize_t n = recv(rank.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n == 0) throw std::runtime_error("rank " + std::to_string(r) + ": the peer closed");
    if (n < 0) return;
    const double t = now();
    rank.input.insert(rank.input.end(), chunk, chunk + n);
    for (;;) {
      const auto scan =
          control::scan_frame(rank.input.data(), rank.input.size(), control::kMaxReplyBytes);
      if (scan.kind != control::FrameScan::Kind::Frame) break;
      control::Envelope message;
      message.ParseFromArray(rank.input.data() + control::kHeaderBytes,
                             static_cast<int>(scan.body_length));
      rank.input.erase(
          rank.input.begin(),
          rank.input.begin() + static_cast<long>(control::kHeaderBytes + scan.body_length));
      handle(r, message, t);
    }
  }

  void handle(size_t r, const control::Envelope& message, double t) {
    Rank& rank = ranks_list_[r];
    if (message.has_error())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + message.error().message());
    if (message.seq() == 0) {
      ++rank.pushes;
      rank.push_times.push_back(t);
      return;
    }
    ++rank.replies;
    if (message.has_registered()) {
      rank.registered = true;
      ++registered_;
      return;
    }
    std::uniform_real_distribution<double> skew(0, jitter_);
    if (message.seq() == rank.begin_seq) {
      if (!rank.small)
        begin_latency_[static_cast<size_t>(rank.phase)].push_back(t - rank.begin_sent);
      timers_.push({t + io_ + skew(random_), r});
    } else if (message.seq() == rank.end_seq) {
      if (!rank.small)
        end_latency_[static_cast<size_t>(rank.phase)].push_back(t - rank.end_sent);
      else
        small_phase_ends_.push_back(rank.end_sent);
      rank.in_phase = false;
      if (++rank.phase >= phases_) {
        --running_;
        return;
      }
      const double planned = rank.base + rank.phase * (compute_ + io_) + compute_ + skew(random_);
      timers_.push({std::max(t, planned), r});
    }
  }

  nlohmann::json report(const Snapshot& before, const Snapshot& after, double seconds) {
    std::uint64_t large_requests = 0, large_pushes = 0, small_requests = 0, small_pushes = 0;
    for (const auto& rank : ranks_list_) {
      (rank.small ? small_requests : large_requests) += rank.requests;
      (rank.small ? small_pushes : large_pushes) += rank.pushes;
    }
    // What the scheduler handled during the phases: each request and its reply, and the pushes;
    // without the other job's own traffic (it is the same in both set-ups).
    const std::uint64_t requests = after.requests - before.requests;
    const std::uint64_t pushes = after.pushes - before.pushes;
    const double scheduler_messages = static_cast<double>(2 * requests + pushes) -
                                      static_cast<double>(2 * small_requests + small_pushes);
    // Directive fan-out: from the other job's PhaseEnd to the last large rank holding the push
    // it caused, when every large rank got one within a second.
    std::vector<double> fan_out;
    for (double t0 : small_phase_ends_) {
      double last = 0;
      bool all = true;
      for (const auto& rank : ranks_list_) {
        if (rank.small) continue;
        const auto it = std::lower_bound(rank.push_times.begin(), rank.push_times.end(), t0);
        if (it == rank.push_times.end() || *it > t0 + 1) {
          all = false;
          break;
        }
        last = std::max(last, *it - t0);
      }
      if (all) fan_out.push_back(last);
    }
    std::vector<double> begin_all, end_all, begin_phase_p99, begin_phase_max;
    for (int k = 0; k < phases_; ++k) {
      const auto& b = begin_latency_[static_cast<size_t>(k)];
      begin_all.insert(begin_all.end(), b.begin(), b.end());
      const auto& e = end_latency_[static_cast<size_t>(k)];
      end_all.insert(end_all.end(), e.begin(), e.end());
      begin_phase_p99.push_back(quantile(b, 0.99));
      begin_phase_max.push_back(quantile(b, 1.0));
    }
    return {
        {"ranks", ranks_},
        {"agents", agents_.size()},
        {"phases", phases_},
        {"seconds", seconds},
        {"scheduler_requests", requests},
        {"scheduler_pushes", pushes},
        {"scheduler_messages_per_phase", scheduler_messages / phases_},
        {"large_job_requests_sent", large_requests},
        {"large_job_pushes_received", large_pushes},
        {"begin_latency_s",
         {{"p50", quantile(begin_all, 0.5)},
          {"p99", quantile(begin_all, 0.99)},
          {"max", quantile(begin_all, 1.0)}}},
        {"end_latency_s",
         {{"p50", quantile(end_all, 0.5)},
          {"p99", quantile(end_all, 0.99)},
          {"max", quantile(end_all, 1.0)}}},
        {"begin_latency_max_per_phase_s", begin_phase_max},
        {"fan_out_s",
         {{"events", fan_out.size()},
          {"p50", quantile(fan_out, 0.5)},
          {"max", quantile(fan_out, 1.0)}}},
    };
  }

  std::string schedd_;
  std::vector<std::string> agents_;
  int ranks_, phases_;
  double compute_, io_, jitter_;
  std::mt19937_64 random_;
  std::string job_;
  int epoll_ = -1;
  std::vector<Rank> ranks_list_;
  size_t registered_ = 0, running_ = 0;
  double next_heartbeat_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<std::vector<double>> begin_latency_ =
      std::vector<std::vector<double>>(static_cast<size_t>(phases_));
  std::vector<std::vector<double>> end_latency_ =
      std::vector<std::vector<double>>(static_cast<size_t>(phases_));
  std::vector<double> small_phase_ends_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "harmonia-agentload: a large job's ranks against a real harmonia-schedd, directly "
      "or through node agents; prints what the scheduler handled per phase (JSON)"};
  std::string schedd, agents_list, job = "agentload";
  int ranks = 1024, phases = 10;
  double compute = 0.5, io = 0.3, jitter = 0.02;
  unsigned seed = 1;
  cli.add_option("--schedd", schedd, "harmonia-schedd's Unix socket")->required();
  cli.add_option("--agents", agents_list,
                 "Node agents' sockets, comma-separated: ranks split evenly among them in rank "
                 "order (default: every rank speaks to the scheduler)");
  cli.add_option("--ranks", ranks, "Ranks of the large job")->check(CLI::Range(1, 16384));
  cli.add_option("--phases", phases, "I/O phases per rank")->check(CLI::Range(1, 10000));
  cli.add_option("--compute", compute, "Seconds between phases")->check(CLI::Range(0.01, 60.0));
  cli.add_option("--io", io, "Seconds a phase lasts")->check(CLI::Range(0.01, 60.0));
  cli.add_option("--jitter", jitter, "Ranks arrive at a phase up to this many seconds apart")
      ->check(CLI::Range(0.0, 10.0));
  cli.add_option("--seed", seed, "Seed of the arrival jitter");
  cli.add_option("--job", job, "Job key of the large job");
  CLI11_PARSE(cli, argc, argv);
  std::vector<std::string> agents;
  std::stringstream split(agents_list);
  for (std::string item; std::getline(split, item, ',');)
    if (!item.empty()) agents.push_back(item);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  try {
    Load load(schedd, agents, ranks, phases, compute, io, jitter, seed, job);
    std::cout << load.run().dump(2) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "harmonia-agentload: " << e.what() << "\n";
    return 1;
  }
}
