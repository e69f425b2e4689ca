// harmonia-agentd: the node agent (docs/node-agent.md). Ranks of one job on this node connect to
// it over a Unix socket (HARMONIA_AGENT) and it speaks for them to harmonia-schedd, one
// connection per group of up to --group-size ranks. One thread, epoll; the decisions are
// NodeAgent's (node_agent.hpp).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "agent/node_agent.hpp"
#include "common/frames.hpp"
#include "common/identity.hpp"
#include "common/schedd_timeout.hpp"
#include "common/signals.hpp"
#include "common/unix_socket.hpp"
#include "control/frame.hpp"

namespace {

using harmonia::agent::Effects;
using harmonia::agent::NodeAgent;
namespace control = harmonia::control;

constexpr std::uint64_t kGroupBit = 1ULL << 62;
constexpr std::uint64_t kListenKey = ~0ULL, kSignalKey = ~0ULL - 1;

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::runtime_error failure(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

struct Peer {
  int fd = -1;
  std::vector<std::uint8_t> input;
  std::string output;
  bool close_after = false;  ///< close once the output is sent
};

class Server {
 public:
  Server(NodeAgent& agent, std::string socket_path, std::string schedd, double tick)
      : agent_(agent), path_(std::move(socket_path)), schedd_(std::move(schedd)), tick_(tick) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) throw failure("epoll_create1");
    // Only this user's processes may connect (the agent checks SO_PEERCRED as well).
    listener_ = harmonia::common::listen_unix(path_, "--socket", "agent", 0700);
    watch(listener_, kListenKey, EPOLLIN, EPOLL_CTL_ADD);
    signals_ = harmonia::common::stop_signals();
    if (signals_ < 0) throw failure("signalfd");
    watch(signals_, kSignalKey, EPOLLIN, EPOLL_CTL_ADD);
  }

  ~Server() {
    for (auto& [key, peer] : peers_) close(peer.fd);
    for (int fd : {listener_, signals_, epoll_})
      if (fd >= 0) close(fd);
    unlink(path_.c_str());
  }

  void run() {
    std::vector<epoll_event> events(256);
    double next_tick = now() + tick_;
    for (;;) {
      const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(std::max(0.0, next_tick - now()) * 1000) + 1);
      if (n < 0 && errno != EINTR) throw failure("epoll_wait");
      for (int i = 0; i < n; ++i) {
        const std::uint64_t key = events[static_cast<size_t>(i)].data.u64;
        if (key == kSignalKey) return;
        if (key == kListenKey) {
          accept_all();
          continue;
        }
        const std::uint32_t what = events[static_cast<size_t>(i)].events;
        if (what & EPOLLOUT) send_some(key);
        if (peers_.count(key) && (what & (EPOLLIN | EPOLLHUP | EPOLLERR))) read_some(key);
      }
      if (now() >= next_tick) {
        Effects out;
        agent_.on_tick(now(), out);
        carry_out(out);
        next_tick = now() + tick_;
      }
    }
  }

 private:
  void watch(int fd, std::uint64_t key, std::uint32_t events, int op) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = key;
    if (epoll_ctl(epoll_, op, fd, &event) != 0) throw failure("epoll_ctl");
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      const std::uint64_t key = next_rank_++;
      watch(fd, key, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      peers_[key].fd = fd;
      std::optional<uid_t> uid;
      if (const auto peer = harmonia::common::peer_identity(fd)) uid = peer->uid;
      agent_.on_rank_connect(key, uid, now());
    }
  }

  void read_some(std::uint64_t key) {
    Peer& peer = peers_.at(key);
    bool gone = false;
    std::uint8_t chunk[65536];
    for (int reads = 0; reads < 16; ++reads) {
      const ssize_t n = recv(peer.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n > 0) {
        peer.input.insert(peer.input.end(), chunk, chunk + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      gone = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      break;
    }
    const bool from_group = key & kGroupBit;
    const size_t limit = from_group ? control::kMaxReplyBytes : control::kMaxRequestBytes;
    for (;;) {
      const auto it = peers_.find(key);
      if (it == peers_.end()) return;  // closed while handling an earlier frame
      auto& input = it->second.input;
      const auto scan = control::scan_frame(input.data(), input.size(), limit);
      if (scan.kind == control::FrameScan::Kind::TooLarge) {
        gone = true;
        break;
      }
      if (scan.kind != control::FrameScan::Kind::Frame) break;
      control::Envelope message;
      const bool parsed = message.ParseFromArray(input.data() + control::kHeaderBytes,
                                                 static_cast<int>(scan.body_length));
      input.erase(input.begin(),
                  input.begin() + static_cast<long>(control::kHeaderBytes + scan.body_length));
      if (!parsed) continue;  // a malformed frame is dropped; the rank's own agent never sends one
      Effects out;
      if (from_group)
        agent_.on_upstream_message(key & ~kGroupBit, message, now(), out);
      else
        agent_.on_rank_message(key, message, now(), out);
      carry_out(out);
    }
    if (gone && peers_.count(key)) {
      close_peer(key);
      Effects out;
      if (from_group)
        agent_.on_upstream_gone(key & ~kGroupBit, out);
      else
        agent_.on_rank_gone(key, now(), out);
      carry_out(out);
    }
  }

  void queue(std::uint64_t key, const control::Envelope& message) {
    const auto it = peers_.find(key);
    if (it == peers_.end()) return;
    harmonia::common::append_frame(it->second.output, message);
  }

  void send_some(std::uint64_t key) {
    const auto it = peers_.find(key);
    if (it == peers_.end()) return;
    Peer& peer = it->second;
    while (!peer.output.empty()) {
      const ssize_t n =
          send(peer.fd, peer.output.data(), peer.output.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        peer.output.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      peer.output.clear();  // the peer is gone: its hang-up is read next
      break;
    }
    if (peer.output.empty() && peer.close_after) {
      close_peer(key);
      return;
    }
    watch(peer.fd, key, EPOLLIN | EPOLLRDHUP | (peer.output.empty() ? 0U : EPOLLOUT),
          EPOLL_CTL_MOD);
  }

  void close_peer(std::uint64_t key) {
    const auto it = peers_.find(key);
    if (it == peers_.end()) return;
    close(it->second.fd);
    peers_.erase(it);
  }

  void carry_out(Effects& out) {
    std::vector<harmonia::agent::GroupId> failed;
    for (auto group : out.open) {
      const int fd = harmonia::common::connect_address(schedd_, close);
      if (fd < 0) {
        failed.push_back(group);
        continue;
      }
      const int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags | O_NONBLOCK);
      const std::uint64_t key = group | kGroupBit;
      watch(fd, key, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      peers_[key].fd = fd;
      if (schedd_.rfind("tcp:", 0) == 0) authenticate(key);
    }
    std::vector<std::uint64_t> touched;
    for (auto& [group, message] : out.upstream) {
      queue(group | kGroupBit, message);
      touched.push_back(group | kGroupBit);
    }
    for (auto& [rank, message] : out.to_ranks) {
      queue(rank, message);
      touched.push_back(rank);
    }
    for (auto rank : out.close_ranks)
      if (const auto it = peers_.find(rank); it != peers_.end()) {
        it->second.close_after = true;
        touched.push_back(rank);
      }
    for (auto group : out.close_groups) close_peer(group | kGroupBit);
    for (std::uint64_t key : touched) send_some(key);
    for (auto group : failed) {
      Effects more;
      agent_.on_upstream_gone(group, more);
      carry_out(more);
    }
  }

  /// Over TCP the scheduler knows this agent's user from a MUNGE credential, sent first with seq
  /// 0 (its answer is not a reply NodeAgent waits for).
  void authenticate(std::uint64_t key) {
    std::string why;
    const auto credential = harmonia::common::make_credential(
        "harmonia-schedd", harmonia::common::munge_socket_from_environment(), why);
    if (!credential) return;  // a scheduler requiring one refuses the registration, said to ranks
    control::Envelope message;
    message.mutable_authenticate()->set_credential(*credential);
    queue(key, message);
  }

  NodeAgent& agent_;
  std::string path_, schedd_;
  double tick_;
  int epoll_ = -1, listener_ = -1, signals_ = -1;
  std::uint64_t next_rank_ = 1;
  std::unordered_map<std::uint64_t, Peer> peers_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "harmonia-agentd: the node agent, which speaks to harmonia-schedd for the ranks "
      "of one job on this node (docs/node-agent.md)"};
  std::string socket_path, schedd;
  harmonia::agent::AgentConfig config;
  config.uid = geteuid();
  double tick = 0.05;
  cli.add_option("--socket", socket_path, "Unix socket the ranks connect to (HARMONIA_AGENT)")
      ->required();
  cli.add_option("--schedd", schedd, "harmonia-schedd's address: PATH or tcp:HOST:PORT")
      ->required();
  cli.add_option("--job", config.job,
                 "The job key it speaks for (default: the first job that registers)");
  cli.add_option("--group-size", config.group_size,
                 "Ranks per connection to the scheduler (the paper: one agent per 64 ranks)")
      ->check(CLI::Range(1U, 1U << 20));
  cli.add_option("--tick", tick, "Seconds between heartbeat and lease checks")
      ->check(CLI::Range(0.001, 1.0));
  const char* from_environment = std::getenv("HARMONIA_SCHEDD_TIMEOUT");
  std::string schedd_timeout = from_environment ? from_environment : "1";
  cli.add_option("--schedd-timeout", schedd_timeout,
                 "Seconds harmonia-schedd may leave a request of a group unanswered before the "
                 "agent gives it up and its ranks write through and reconnect: the ranks' own "
                 "bound (default: HARMONIA_SCHEDD_TIMEOUT, as for the ranks, else 1)");
  CLI11_PARSE(cli, argc, argv);
  if (const auto seconds = harmonia::common::parse_schedd_timeout(schedd_timeout.c_str())) {
    config.unresponsive_seconds = *seconds;
  } else {
    const bool given = cli.count("--schedd-timeout") > 0;
    std::cerr << "harmonia-agentd: " << (given ? "--schedd-timeout " : "HARMONIA_SCHEDD_TIMEOUT=")
              << schedd_timeout << ": " << harmonia::common::kScheddTimeoutExpected << "\n";
    return 2;
  }
  try {
    NodeAgent agent(config);
    Server server(agent, socket_path, schedd, tick);
    std::cout << "harmonia-agentd: listening on " << socket_path << " for uid " << config.uid
              << std::endl;
    server.run();
    const auto& c = agent.counters();
    std::cout << "{\"from_ranks\": " << c.from_ranks << ", \"to_ranks\": " << c.to_ranks
              << ", \"to_scheduler\": " << c.to_scheduler
              << ", \"from_scheduler\": " << c.from_scheduler << "}" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "harmonia-agentd: " << e.what() << "\n";
    return 2;
  }
}
