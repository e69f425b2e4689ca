#pragma once
/// @file harmonia-schedd's event loop: Unix and TCP listening sockets, length-prefixed frames
/// (control/frame.hpp), one Service (service.hpp) fed from one thread with epoll.

#include <cstdint>
#include <string>

#include "schedd/service.hpp"

namespace harmonia::schedd {

struct ServerConfig {
  std::string unix_path;       ///< listen on this Unix socket (empty: no)
  std::string tcp;             ///< listen on "HOST:PORT" (empty: no); port 0 picks a free one
  double tick_seconds = 0.05;  ///< how often windows move and leases are checked
};

class Server {
 public:
  /// Binds the sockets; throws std::runtime_error naming the address and the reason.
  Server(Service& service, ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The TCP port actually bound (0 without TCP).
  std::uint16_t tcp_port() const { return tcp_port_; }
  /// Serves until SIGINT or SIGTERM (blocked in the calling thread and read from a signalfd).
  void run();

 private:
  struct Connection;
  void accept_all(int listener, bool is_unix);
  void on_readable(Connection& connection);
  void send_all(std::vector<Outgoing>& out);
  void queue(Connection& connection, const control::Envelope& message);
  void flush_output(Connection& connection);
  void close_connection(ConnectionId id);

  Service& service_;
  ServerConfig config_;
  int epoll_ = -1, unix_ = -1, tcp_ = -1, signals_ = -1;
  std::uint16_t tcp_port_ = 0;
  ConnectionId next_id_ = 1;
  std::unordered_map<ConnectionId, std::unique_ptr<Connection>> connections_;
};

/// Seconds on the monotonic clock.
double monotonic_seconds();

}  // namespace harmonia::schedd
