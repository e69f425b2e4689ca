#include "schedd/server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#include "common/frames.hpp"
#include "common/identity.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "common/tcp.hpp"
#include "common/unix_socket.hpp"
#include "control/frame.hpp"

namespace harmonia::schedd {

namespace {

/// Output a peer does not read is dropped with the peer beyond this (or the global cap).
constexpr size_t kMaxQueuedOutput = 128UL << 20;
/// A connection with more unsent output than this is not read from until its peer reads: a
/// client sending requests without reading the replies is slowed down, not fed.
constexpr size_t kPauseReadingBytes = 4UL << 20;
/// Reads of one connection per wakeup: the others get their turn.
constexpr int kReadsPerWakeup = 16;
/// What Server::accept_with_reserve returns instead of a descriptor.
constexpr int kRefused = -1, kNobodyWaiting = -2;
/// Accepting pauses this long when descriptors or memory run out and no reserve is left.
constexpr double kAcceptBackoffSeconds = 0.1;
/// A TCP connection with no identity is closed after this long without a credential; one let
/// in on probation (Server::admit) after the shorter time.
constexpr double kAuthenticateWithinSeconds = 10;
constexpr double kProbationWithinSeconds = 2;

std::runtime_error failure(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

void watch(int epoll, int fd, std::uint64_t key, std::uint32_t events, int op = EPOLL_CTL_ADD) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = key;
  if (epoll_ctl(epoll, op, fd, &event) != 0) throw failure("epoll_ctl");
}

// Keys of the listening sockets in epoll; connections use their ids (>= 1, below these).
constexpr std::uint64_t kUnixKey = ~0ULL, kTcpKey = ~0ULL - 1, kSignalKey = ~0ULL - 2;

/// The host a connection comes from, as log lines name it: "local" for the Unix socket.
std::string peer_node(int fd, bool is_tcp) { return is_tcp ? common::peer_address(fd) : "local"; }

/// Logs LINE (a warning: a resource ran out, or a request was refused) at most once a second
/// per `kind`, counting the lines left out (a client reconnecting in a loop must not fill the
/// log).
void log_limited(int kind, const std::string& line, const common::log::Subject& subject = {}) {
  static double last[5] = {-1e9, -1e9, -1e9, -1e9, -1e9};
  static unsigned skipped[5];
  const double now = monotonic_seconds();
  if (now - last[kind] < 1.0) {
    ++skipped[kind];
    return;
  }
  last[kind] = now;
  common::log::warning(skipped[kind] > 0 ? line + " (and " + std::to_string(skipped[kind]) +
                                               " more since the last such line)"
                                         : line,
                       subject);
  skipped[kind] = 0;
}
enum LogKind { kDescriptors = 0, kMemory = 1, kOutput = 2, kRequestRefused = 3, kTooMany = 4 };

int open_reserve() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

/// The error a connection gets when it may not keep its slot (then it is closed).
control::Envelope busy(const std::string& why) {
  control::Envelope reply;
  reply.mutable_error()->set_message("harmonia-schedd is busy: " + why);
  return reply;
}

}  // namespace

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Server::Connection {
  ConnectionId id;
  int fd;
  std::vector<std::uint8_t> input;
  std::string output;
  size_t output_sent = 0;
  std::uint32_t armed = EPOLLIN | EPOLLRDHUP;  ///< the events epoll watches for it
  bool close_after = false;  ///< close once the output is sent (after a fatal error reply)
  bool is_tcp = false;
  std::string peer;        ///< whom its slot counts for (Server::admit); empty: nobody
  bool known = false;      ///< its user is known (the kernel's word, or a credential)
  bool probation = false;  ///< let in past a bound until it authenticates (Server::admit)
  std::string refusal;     ///< why it would not have been let in (probation)

  size_t unsent() const { return output.size() - output_sent; }
  /// Reading waits for the peer to read its replies.
  bool paused() const { return unsent() > kPauseReadingBytes; }
};

Server::Server(Service& service, ServerConfig config)
    : service_(service), config_(std::move(config)) {
  if (config_.unix_path.empty() && config_.tcp.empty())
    throw std::runtime_error("nothing to listen on: give a Unix socket path or a TCP address");
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw failure("epoll_create1");
  if (!config_.unix_path.empty()) {
    // Every user's jobs may connect; a job stays bound to the user who registered it first.
    unix_ = common::listen_unix(config_.unix_path, "socket", "daemon", 0666);
    watch(epoll_, unix_, kUnixKey, EPOLLIN);
  }
  if (!config_.tcp.empty()) {
    try {
      tcp_ = common::listen_tcp(config_.tcp, "tcp", SOCK_NONBLOCK, tcp_port_);
      if (!config_.tcp_credentials && !common::loopback_only(tcp_)) {
        close(tcp_);
        throw std::runtime_error(
            "--tcp " + config_.tcp +
            ": not a loopback address, and peers on other hosts can only say who they are with "
            "a MUNGE credential: start with --auth munge (or listen on 127.0.0.1)");
      }
    } catch (const std::exception&) {  // no Unix socket file left behind either
      if (unix_ >= 0) {
        close(unix_);
        unlink(config_.unix_path.c_str());
      }
      close(epoll_);
      throw;
    }
    watch(epoll_, tcp_, kTcpKey, EPOLLIN);
  }
  signals_ = common::stop_signals();
  if (signals_ < 0) throw failure("signalfd");
  watch(epoll_, signals_, kSignalKey, EPOLLIN);
  reserve_ = open_reserve();
}

Server::~Server() {
  for (auto& [id, connection] : connections_) close(connection->fd);
  for (int fd : {unix_, tcp_, signals_, epoll_, reserve_})
    if (fd >= 0) close(fd);
  if (!config_.unix_path.empty()) unlink(config_.unix_path.c_str());
}

void Server::run() {
  std::vector<epoll_event> events(256);
  double next_tick = monotonic_seconds() + config_.tick_seconds;
  for (;;) {
    const double until =
        accept_paused_until_ > 0 ? std::min(next_tick, accept_paused_until_) : next_tick;
    const double wait = std::max(0.0, until - monotonic_seconds());
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                             static_cast<int>(wait * 1000) + 1);
    if (n < 0 && errno != EINTR) throw failure("epoll_wait");
    for (int i = 0; i < n; ++i) {
      const std::uint64_t key = events[static_cast<size_t>(i)].data.u64;
      if (key == kSignalKey) return;
      try {
        if (key == kUnixKey || key == kTcpKey) {
          accept_all(key == kUnixKey ? unix_ : tcp_, key == kUnixKey);
          continue;
        }
        const auto found = connections_.find(key);
        if (found == connections_.end()) continue;  // closed earlier in this batch
        const std::uint32_t what = events[static_cast<size_t>(i)].events;
        if (what & EPOLLOUT) flush_output(*found->second);
        // Sending may have closed it.
        const auto still = connections_.find(key);
        if (still == connections_.end()) continue;
        if (still->second->paused() && (what & (EPOLLHUP | EPOLLERR)))
          close_connection(key);  // gone while it was not read from: nobody takes its replies
        else if (what & (EPOLLIN | EPOLLHUP | EPOLLERR))
          on_readable(*still->second);
      } catch (const std::bad_alloc&) {
        // Out of memory for this connection's input or replies: drop it, serve the others.
        log_limited(kMemory, "out of memory serving connection " + std::to_string(key) +
                                 ": connection closed");
        if (key != kUnixKey && key != kTcpKey) close_connection(key);
      }
    }
    if (!resumed_.empty()) resume_reading();
    const double now = monotonic_seconds();
    if (accept_paused_until_ > 0 && now >= accept_paused_until_) {
      accept_paused_until_ = 0;
      if (reserve_ < 0) reserve_ = open_reserve();
      if (unix_ >= 0) watch(epoll_, unix_, kUnixKey, EPOLLIN, EPOLL_CTL_MOD);
      if (tcp_ >= 0) watch(epoll_, tcp_, kTcpKey, EPOLLIN, EPOLL_CTL_MOD);
    }
    if (now >= next_tick) {
      close_unauthenticated(now);
      std::vector<Outgoing> out;
      for (ConnectionId id : service_.on_tick(now, out)) close_connection(id);
      send_all(out);
      if (config_.after_tick) config_.after_tick(now);
      next_tick = now + config_.tick_seconds;
    }
  }
}

void Server::pause_accepting(double seconds) {
  if (accept_paused_until_ > 0) return;
  accept_paused_until_ = monotonic_seconds() + seconds;
  // Level-triggered listeners with connections waiting would wake every epoll_wait: unwatched.
  if (unix_ >= 0) watch(epoll_, unix_, kUnixKey, 0, EPOLL_CTL_MOD);
  if (tcp_ >= 0) watch(epoll_, tcp_, kTcpKey, 0, EPOLL_CTL_MOD);
}

int Server::accept_with_reserve(int listener, int error) {
  int fd = -1;
  bool waiting = true;
  if (reserve_ >= 0) {
    close(reserve_);
    fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    waiting = fd >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    reserve_ = open_reserve();
  }
  if (fd >= 0 && reserve_ >= 0) return fd;  // descriptors were freed meanwhile: serve it
  if (!waiting) return kNobodyWaiting;
  log_limited(kDescriptors, std::string("accept: ") + std::strerror(error) + " (" +
                                std::to_string(connections_.size()) +
                                " connections open): new connections refused until some close");
  if (fd >= 0) {  // tell the connection waiting, then close it
    control::Envelope reply;
    reply.mutable_error()->set_message(std::string("harmonia-schedd is out of file descriptors (") +
                                       std::strerror(error) + "): try again later");
    std::string frame;
    common::append_frame(frame, reply);
    (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }
  if (reserve_ >= 0) return kRefused;
  pause_accepting(kAcceptBackoffSeconds);  // no spare: wait for descriptors to close
  return kNobodyWaiting;
}

void Server::accept_all(int listener, bool is_unix) {
  for (;;) {
    if (accept_paused_until_ > 0) return;
    int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      fd = accept_with_reserve(listener, errno);
      if (fd == kNobodyWaiting) return;
      if (fd == kRefused) continue;
    }
    if (fd < 0) {
      const int error = errno;
      if (error == ENOBUFS || error == ENOMEM) {
        log_limited(kMemory,
                    std::string("accept: ") + std::strerror(error) + ": new connections wait");
        pause_accepting(kAcceptBackoffSeconds);
        return;
      }
      if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;
      return;  // EAGAIN: nobody else waiting
    }
    // Who it is, from the kernel: a Unix socket's peer, or (--auth peer) a TCP peer on this
    // host. With --auth munge a TCP peer has no identity until it authenticates.
    std::optional<uid_t> uid;
    if (is_unix || !config_.tcp_credentials)
      if (const auto peer = common::peer_identity(fd)) uid = peer->uid;
    if (!is_unix) {
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    }
    std::string refusal;
    const Admitted admitted =
        admit(fd, uid, !is_unix, !is_unix && config_.tcp_credentials, refusal);
    if (admitted == Admitted::No) continue;
    const ConnectionId id = next_id_++;
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.u64 = id;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {  // out of memory or watches
      log_limited(kMemory,
                  std::string("epoll_ctl: ") + std::strerror(errno) + ": connection refused");
      close(fd);
      continue;
    }
    try {
      connections_[id] = std::make_unique<Connection>(
          Connection{id, fd, {}, {}, 0, EPOLLIN | EPOLLRDHUP, false, false, {}, false, false, {}});
      Connection& connection = *connections_[id];
      connection.is_tcp = !is_unix;
      connection.known = uid.has_value();
      if (admitted == Admitted::OnProbation) {
        connection.probation = true;
        connection.refusal = std::move(refusal);
        ++on_probation_;
      } else {
        connection.peer = common::peer_key(fd, uid);
        ++per_peer_[connection.peer];
      }
      if (!connection.known)
        (connection.probation ? probation_deadlines_ : authentication_deadlines_)
            .emplace_back(monotonic_seconds() + (connection.probation ? kProbationWithinSeconds
                                                                      : kAuthenticateWithinSeconds),
                          id);
    } catch (const std::bad_alloc&) {
      log_limited(kMemory, "out of memory: connection refused");
      close(fd);
      continue;
    }
    service_.on_connect(id, uid, monotonic_seconds());
  }
}

void Server::on_readable(Connection& connection) {
  const ConnectionId id = connection.id;
  bool closed = false;
  for (int reads = 0; reads < kReadsPerWakeup; ++reads) {
    // Reading resumes once the peer reads its replies (flush_output).
    if (connection.paused() || connection.close_after) break;
    std::uint8_t chunk[65536];
    const ssize_t n = recv(connection.fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      closed = true;  // end of stream or a hard error
      break;
    }
    connection.input.insert(connection.input.end(), chunk, chunk + n);
    if (!handle_input(connection)) return;  // closed meanwhile
    if (static_cast<size_t>(n) < sizeof(chunk)) break;
  }
  if (closed) {
    close_connection(id);
    return;
  }
  arm(connection);
}

common::log::Subject Server::subject(const Connection& connection) const {
  auto [uid, job] = service_.who(connection.id);
  return {job, uid, peer_node(connection.fd, connection.is_tcp)};
}

/// Logs the requests refused for who sent them (no identity, a bad credential, another user's
/// job), naming the connection's user, its job (or the one it asked for) and its host, so that
/// an administrator sees attempts.
void Server::log_refusals(const Connection& connection, const control::Envelope& request,
                          const std::vector<Outgoing>& out) {
  for (const Outgoing& message : out) {
    if (message.to != connection.id || !message.message.has_error()) continue;
    const auto code = message.message.error().code();
    if (code != control::Error::CODE_UNAUTHENTICATED && code != control::Error::CODE_FORBIDDEN)
      continue;
    auto about = subject(connection);
    if (about.job.empty() && request.has_register_process())
      about.job = request.register_process().job();
    log_limited(kRequestRefused,
                std::string("refused a request of connection ") + std::to_string(connection.id) +
                    (connection.is_tcp ? " (tcp)" : " (unix)") + ": " +
                    message.message.error().message(),
                about);
  }
}

bool Server::handle_input(Connection& connection) {
  const ConnectionId id = connection.id;
  std::vector<Outgoing> out;
  std::vector<ConnectionId> touched;
  size_t used = 0;
  const double now = monotonic_seconds();
  // One frame at a time, its replies queued before the next: a small request may get a large
  // reply, so a connection pauses between two frames (the rest waits in `input`).
  while (!connection.close_after && !connection.paused()) {
    const auto scan = control::scan_frame(
        connection.input.data() + used, connection.input.size() - used, control::kMaxRequestBytes);
    if (scan.kind == control::FrameScan::Kind::NeedMore) break;
    if (scan.kind == control::FrameScan::Kind::TooLarge) {
      control::Envelope reply;
      reply.mutable_error()->set_code(control::Error::CODE_MALFORMED);
      reply.mutable_error()->set_message("frame of " + std::to_string(scan.body_length) +
                                         " bytes: at most " +
                                         std::to_string(control::kMaxRequestBytes) + " allowed");
      out.push_back({id, std::move(reply)});
      connection.close_after = true;  // the stream cannot be resynchronised
      break;
    }
    control::Envelope request;
    const std::uint8_t* body = connection.input.data() + used + control::kHeaderBytes;
    if (!request.ParseFromArray(body, static_cast<int>(scan.body_length))) {
      service_.on_malformed(id, now, out);
    } else if (connection.probation && !request.has_authenticate()) {
      // Let in past a bound only to authenticate: anything else closes it unanswered, as a
      // refusal at accept does.
      log_limited(
          kTooMany,
          connection.refusal + ": connection " + std::to_string(id) + " refused (no credential)",
          subject(connection));
      flush_all(touched);
      close_connection(id);
      return false;
    } else {
      service_.on_message(id, request, now, out);
      if (config_.after_request) config_.after_request(monotonic_seconds() - now);
      log_refusals(connection, request, out);
      if (!connection.known && request.has_authenticate()) settle(connection, out);
    }
    used += control::kHeaderBytes + scan.body_length;
    queue_all(out, touched);
  }
  queue_all(out, touched);
  connection.input.erase(connection.input.begin(),
                         connection.input.begin() + static_cast<long>(used));
  flush_all(touched);  // may close this connection (its peer gone) or drop it (the output cap)
  return connections_.find(id) != connections_.end();
}

void Server::resume_reading() {
  std::vector<ConnectionId> resumed;
  resumed.swap(resumed_);
  for (ConnectionId id : resumed) {
    const auto found = connections_.find(id);
    if (found == connections_.end() || found->second->paused()) continue;
    if (handle_input(*found->second)) arm(*connections_.at(id));
  }
}

void Server::arm(Connection& connection) {
  std::uint32_t wanted = connection.paused() ? 0 : EPOLLIN | EPOLLRDHUP;
  if (connection.unsent() > 0) wanted |= EPOLLOUT;
  if (wanted == connection.armed) return;
  watch(epoll_, connection.fd, connection.id, wanted, EPOLL_CTL_MOD);
  connection.armed = wanted;
}

void Server::queue(Connection& connection, const control::Envelope& message) {
  const size_t before = connection.output.size();
  common::append_frame(connection.output, message);
  queued_output_ += connection.output.size() - before;
}

void Server::enforce_output_cap() {
  while (queued_output_ > config_.max_output_bytes) {
    Connection* largest = nullptr;
    for (auto& [id, connection] : connections_)
      if (largest == nullptr || connection->unsent() > largest->unsent())
        largest = connection.get();
    if (largest == nullptr || largest->unsent() == 0) return;
    log_limited(kOutput,
                "connection " + std::to_string(largest->id) +
                    " dropped: " + std::to_string(largest->unsent()) +
                    " bytes of replies unread while all connections held " +
                    std::to_string(queued_output_) + ", at most " +
                    std::to_string(config_.max_output_bytes) + " (--max-output)",
                subject(*largest));
    close_connection(largest->id);
  }
}

void Server::queue_all(std::vector<Outgoing>& out, std::vector<ConnectionId>& touched) {
  for (const Outgoing& message : out) {
    const auto found = connections_.find(message.to);
    if (found == connections_.end()) continue;
    queue(*found->second, message.message);
    touched.push_back(message.to);
  }
  out.clear();
}

void Server::flush_all(const std::vector<ConnectionId>& touched) {
  for (ConnectionId id : touched) {
    const auto found = connections_.find(id);
    if (found != connections_.end()) flush_output(*found->second);
  }
  enforce_output_cap();
}

void Server::send_all(std::vector<Outgoing>& out) {
  std::vector<ConnectionId> touched;
  queue_all(out, touched);
  flush_all(touched);
}

void Server::flush_output(Connection& connection) {
  while (connection.output_sent < connection.output.size()) {
    const ssize_t n = send(connection.fd, connection.output.data() + connection.output_sent,
                           connection.output.size() - connection.output_sent, MSG_NOSIGNAL);
    if (n > 0) {
      connection.output_sent += static_cast<size_t>(n);
      queued_output_ -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (connection.unsent() > std::min(kMaxQueuedOutput, config_.max_output_bytes)) {
        log_limited(kOutput,
                    "connection " + std::to_string(connection.id) + " dropped: " +
                        std::to_string(connection.unsent()) + " bytes of replies unread",
                    subject(connection));
        close_connection(connection.id);  // a peer that does not read
        return;
      }
      if (connection.output_sent >= (1UL << 20) &&
          connection.output_sent * 2 >= connection.output.size()) {  // drop what was sent
        connection.output.erase(0, connection.output_sent);
        connection.output_sent = 0;
      }
      if (!(connection.armed & EPOLLIN) && !connection.paused() && !connection.input.empty())
        resumed_.push_back(connection.id);
      arm(connection);
      return;
    }
    close_connection(connection.id);
    return;
  }
  if (connection.output.capacity() > kPauseReadingBytes)
    std::string().swap(connection.output);  // a large reply's memory goes back
  else
    connection.output.clear();
  connection.output_sent = 0;
  if (!(connection.armed & EPOLLIN) && !connection.input.empty())
    resumed_.push_back(connection.id);  // frames read before it paused: the run loop takes them
  arm(connection);
  if (connection.close_after) close_connection(connection.id);
}

std::size_t Server::descriptor_limit() {
  rlimit files{};
  return getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
             ? static_cast<std::size_t>(files.rlim_cur)
             : std::size_t{1} << 20;
}

std::string Server::bound_reached(const std::string& key, std::optional<uid_t> uid,
                                  std::size_t others, bool reserved) {
  if (uid && config_.admins.contains(*uid)) return {};
  // The last slots (of the descriptors this daemon may open) are root's and the
  // administrators': a user's connections cannot lock them out (docs/limits.md).
  if (reserved && others + config_.reserved >= descriptor_limit())
    return "its last " + std::to_string(config_.reserved) +
           " connections are kept for root and the administrators";
  if (const auto held = per_peer_.find(key);
      held != per_peer_.end() && held->second >= config_.per_peer)
    return "too many connections from " + key + (uid ? "" : " before they authenticate") +
           " (at most " + std::to_string(config_.per_peer) + " each)";
  return {};
}

Server::Admitted Server::admit(int fd, std::optional<uid_t> uid, bool is_tcp, bool may_authenticate,
                               std::string& refusal) {
  const std::string key = common::peer_key(fd, uid);
  refusal = bound_reached(key, uid, connections_.size(), true);
  if (refusal.empty()) return Admitted::Yes;
  // A peer that may still say who it is gets its chance: root, or a user of a busy host.
  if (may_authenticate && !uid && on_probation_ < config_.reserved) return Admitted::OnProbation;
  log_limited(kTooMany, refusal + ": connection of " + key + " refused",
              {"", uid, peer_node(fd, is_tcp)});
  close(fd);
  return Admitted::No;
}

void Server::settle(Connection& connection, std::vector<Outgoing>& out) {
  const auto reply = std::find_if(out.begin(), out.end(), [&](const Outgoing& message) {
    return message.to == connection.id && message.message.has_authenticated();
  });
  if (reply == out.end()) {  // refused: a connection on probation has had its chance
    if (connection.probation) connection.close_after = true;
    return;
  }
  const uid_t uid = reply->message.authenticated().uid();
  const bool probation = connection.probation;
  uncount(connection);
  connection.known = true;
  const std::string key = common::peer_key(connection.fd, uid);
  // On probation it may hold a slot kept for root; otherwise it had one of the others.
  const std::string why = bound_reached(key, uid, connections_.size() - 1, probation);
  if (!why.empty()) {
    log_limited(kTooMany, why + ": connection of " + key + " refused", subject(connection));
    reply->message = busy(why);
    connection.close_after = true;
    return;
  }
  connection.peer = key;
  ++per_peer_[key];
}

void Server::uncount(Connection& connection) {
  if (connection.probation) --on_probation_;
  if (!connection.peer.empty() && --per_peer_[connection.peer] == 0)
    per_peer_.erase(connection.peer);
  connection.probation = false;
  connection.peer.clear();
}

void Server::close_unauthenticated(double now) {
  for (auto* deadlines : {&authentication_deadlines_, &probation_deadlines_}) {
    while (!deadlines->empty() && deadlines->front().first <= now) {
      const ConnectionId id = deadlines->front().second;
      deadlines->pop_front();
      const auto found = connections_.find(id);
      if (found == connections_.end() || found->second->known) continue;
      const double within =
          deadlines == &probation_deadlines_ ? kProbationWithinSeconds : kAuthenticateWithinSeconds;
      log_limited(kTooMany,
                  "connection " + std::to_string(id) + " closed: no credential within " +
                      std::to_string(static_cast<int>(within)) + " s",
                  subject(*found->second));
      close_connection(id);
    }
  }
}

void Server::close_connection(ConnectionId id) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) return;
  close(found->second->fd);  // also removes it from epoll
  uncount(*found->second);
  queued_output_ -= found->second->unsent();
  connections_.erase(found);
  std::vector<Outgoing> out;
  service_.on_disconnect(id, monotonic_seconds(), out);
  send_all(out);
}

}  // namespace harmonia::schedd
