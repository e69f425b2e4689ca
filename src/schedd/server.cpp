#include "schedd/server.hpp"

#include <fcntl.h>
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

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/frames.hpp"
#include "common/tcp.hpp"
#include "control/frame.hpp"

namespace harmonia::schedd {

namespace {

/// Output a peer does not read is dropped with the peer beyond this.
constexpr size_t kMaxQueuedOutput = 128UL << 20;

std::runtime_error failure(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

int listen_unix(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    throw std::runtime_error("socket path " + path + ": longer than " +
                             std::to_string(sizeof(address.sun_path) - 1) + " bytes");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw failure("socket " + path);
  // A socket file left by a dead daemon is replaced; a live daemon's is not.
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(probe);
    if (alive) {
      close(fd);
      throw std::runtime_error("socket " + path + ": another daemon is listening on it");
    }
    unlink(path.c_str());
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 1024) != 0) {
    const auto error = failure("socket " + path);
    close(fd);
    throw error;
  }
  // Every user's jobs may connect; a job stays bound to the user who registered it first.
  chmod(path.c_str(), 0666);
  return fd;
}

void watch(int epoll, int fd, std::uint64_t key, std::uint32_t events, int op = EPOLL_CTL_ADD) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = key;
  if (epoll_ctl(epoll, op, fd, &event) != 0) throw failure("epoll_ctl");
}

// Keys of the listening sockets in epoll; connections use their ids (>= 1, below these).
constexpr std::uint64_t kUnixKey = ~0ULL, kTcpKey = ~0ULL - 1, kSignalKey = ~0ULL - 2;

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
  bool writing = false;      ///< EPOLLOUT is armed
  bool close_after = false;  ///< close once the output is sent (after a fatal error reply)
};

Server::Server(Service& service, ServerConfig config)
    : service_(service), config_(std::move(config)) {
  if (config_.unix_path.empty() && config_.tcp.empty())
    throw std::runtime_error("nothing to listen on: give a Unix socket path or a TCP address");
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw failure("epoll_create1");
  if (!config_.unix_path.empty()) {
    unix_ = listen_unix(config_.unix_path);
    watch(epoll_, unix_, kUnixKey, EPOLLIN);
  }
  if (!config_.tcp.empty()) {
    try {
      tcp_ = common::listen_tcp(config_.tcp, "tcp", SOCK_NONBLOCK, tcp_port_);
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
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signals_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signals_ < 0) throw failure("signalfd");
  watch(epoll_, signals_, kSignalKey, EPOLLIN);
}

Server::~Server() {
  for (auto& [id, connection] : connections_) close(connection->fd);
  for (int fd : {unix_, tcp_, signals_, epoll_})
    if (fd >= 0) close(fd);
  if (!config_.unix_path.empty()) unlink(config_.unix_path.c_str());
}

void Server::run() {
  std::vector<epoll_event> events(256);
  double next_tick = monotonic_seconds() + config_.tick_seconds;
  for (;;) {
    const double wait = std::max(0.0, next_tick - monotonic_seconds());
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                             static_cast<int>(wait * 1000) + 1);
    if (n < 0 && errno != EINTR) throw failure("epoll_wait");
    for (int i = 0; i < n; ++i) {
      const std::uint64_t key = events[static_cast<size_t>(i)].data.u64;
      if (key == kSignalKey) return;
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
      if (still != connections_.end() && (what & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        on_readable(*still->second);
    }
    const double now = monotonic_seconds();
    if (now >= next_tick) {
      std::vector<Outgoing> out;
      for (ConnectionId id : service_.on_tick(now, out)) close_connection(id);
      send_all(out);
      next_tick = now + config_.tick_seconds;
    }
  }
}

void Server::accept_all(int listener, bool is_unix) {
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a peer that went away: nothing to do
    std::optional<uid_t> uid;
    if (is_unix) {
      ucred credentials{};
      socklen_t length = sizeof(credentials);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0)
        uid = credentials.uid;
    } else {
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    }
    const ConnectionId id = next_id_++;
    connections_[id] = std::make_unique<Connection>(Connection{id, fd, {}, {}, 0, false, false});
    watch(epoll_, fd, id, EPOLLIN | EPOLLRDHUP);
    service_.on_connect(id, uid, monotonic_seconds());
  }
}

void Server::on_readable(Connection& connection) {
  const ConnectionId id = connection.id;
  std::vector<Outgoing> out;
  bool closed = false;
  for (;;) {
    std::uint8_t chunk[65536];
    const ssize_t n = recv(connection.fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      connection.input.insert(connection.input.end(), chunk, chunk + n);
      if (static_cast<size_t>(n) < sizeof(chunk)) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    closed = true;  // end of stream or a hard error
    break;
  }
  size_t used = 0;
  const double now = monotonic_seconds();
  while (!connection.close_after) {
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
    if (request.ParseFromArray(body, static_cast<int>(scan.body_length)))
      service_.on_message(id, request, now, out);
    else
      service_.on_malformed(id, now, out);
    used += control::kHeaderBytes + scan.body_length;
  }
  connection.input.erase(connection.input.begin(),
                         connection.input.begin() + static_cast<long>(used));
  send_all(out);
  if (closed) close_connection(id);
}

void Server::queue(Connection& connection, const control::Envelope& message) {
  common::append_frame(connection.output, message);
}

void Server::send_all(std::vector<Outgoing>& out) {
  std::vector<ConnectionId> touched;
  for (const Outgoing& message : out) {
    const auto found = connections_.find(message.to);
    if (found == connections_.end()) continue;
    queue(*found->second, message.message);
    touched.push_back(message.to);
  }
  out.clear();
  for (ConnectionId id : touched) {
    const auto found = connections_.find(id);
    if (found != connections_.end()) flush_output(*found->second);
  }
}

void Server::flush_output(Connection& connection) {
  while (connection.output_sent < connection.output.size()) {
    const ssize_t n = send(connection.fd, connection.output.data() + connection.output_sent,
                           connection.output.size() - connection.output_sent, MSG_NOSIGNAL);
    if (n > 0) {
      connection.output_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (connection.output.size() - connection.output_sent > kMaxQueuedOutput) {
        close_connection(connection.id);  // a peer that does not read
        return;
      }
      if (!connection.writing) {
        watch(epoll_, connection.fd, connection.id, EPOLLIN | EPOLLRDHUP | EPOLLOUT, EPOLL_CTL_MOD);
        connection.writing = true;
      }
      return;
    }
    close_connection(connection.id);
    return;
  }
  connection.output.clear();
  connection.output_sent = 0;
  if (connection.writing) {
    watch(epoll_, connection.fd, connection.id, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
    connection.writing = false;
  }
  if (connection.close_after) close_connection(connection.id);
}

void Server::close_connection(ConnectionId id) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) return;
  close(found->second->fd);  // also removes it from epoll
  connections_.erase(found);
  std::vector<Outgoing> out;
  service_.on_disconnect(id, monotonic_seconds(), out);
  send_all(out);
}

}  // namespace harmonia::schedd
