#pragma once
/// @file harmonia-schedd's event loop: Unix and TCP listening sockets, length-prefixed frames
/// (control/frame.hpp), one Service (service.hpp) fed from one thread with epoll.

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "common/identity.hpp"
#include "common/log.hpp"
#include "schedd/service.hpp"

namespace harmonia::schedd {

struct ServerConfig {
  std::string unix_path;  ///< listen on this Unix socket (empty: no)
  std::string tcp;        ///< listen on "HOST:PORT" (empty: no); port 0 picks a free one
  /// TCP peers on other hosts can authenticate (MUNGE): without, the TCP address must be a
  /// loopback one, whose peers the kernel names.
  bool tcp_credentials = false;
  /// Connections one user (or one address, before it authenticates) may hold, and the slots
  /// kept for root and the administrators (`admins`): nobody can take every descriptor.
  std::size_t per_peer = 1024;
  std::size_t reserved = 64;
  common::Administrators admins;
  double tick_seconds = 0.05;  ///< how often windows move and leases are checked
  /// Replies and pushes queued for all connections together, bytes: past it, the connection
  /// holding the most unread output is dropped (docs/limits.md).
  size_t max_output_bytes = 256UL << 20;
  /// Called after each timer tick with the time (harmonia-schedd --accounting writes its files).
  std::function<void(double now)> after_tick;
  /// Called after each request with the seconds the service took to answer it (metrics).
  std::function<void(double seconds)> after_request;
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
  /// Handles the complete frames read; false when the connection was closed meanwhile.
  bool handle_input(Connection& connection);
  /// Frames left in the input of connections that paused, now that their peers read.
  void resume_reading();
  void queue_all(std::vector<Outgoing>& out, std::vector<ConnectionId>& touched);
  void flush_all(const std::vector<ConnectionId>& touched);
  void send_all(std::vector<Outgoing>& out);
  void queue(Connection& connection, const control::Envelope& message);
  void flush_output(Connection& connection);
  void close_connection(ConnectionId id);
  enum class Admitted { No, Yes, OnProbation };
  /// Whether the connection `fd` (over TCP when `is_tcp`) of `uid` (nullopt: not known yet) may
  /// have a slot (ServerConfig::per_peer, reserved); closes it, with a log line, when not. A TCP
  /// peer that `may_authenticate` past a bound is let in on probation instead (at most
  /// `reserved` at once), `refusal` saying which: its first request must be an Authenticate,
  /// within 2 s, naming a user the bound does not hold back (root on a busy daemon, a user of a
  /// busy host).
  Admitted admit(int fd, std::optional<uid_t> uid, bool is_tcp, bool may_authenticate,
                 std::string& refusal);
  /// Why a connection counted under `key` (of `uid`, if known) may not have a slot, with
  /// `others` open besides it; `reserved`: whether the slots kept for root and the
  /// administrators are out of its reach. Empty: it may.
  std::string bound_reached(const std::string& key, std::optional<uid_t> uid, std::size_t others,
                            bool reserved);
  /// The connection sent an Authenticate, answered in `out`: once it has a user it counts under
  /// that user, or is refused (the reply replaced) when that user may not have the slot.
  void settle(Connection& connection, std::vector<Outgoing>& out);
  /// Stops counting the connection under its peer (or on probation).
  void uncount(Connection& connection);
  /// Closes the TCP connections that have had no identity for their time.
  void close_unauthenticated(double now);
  static std::size_t descriptor_limit();
  void arm(Connection& connection);
  void enforce_output_cap();
  void log_refusals(const Connection& connection, const control::Envelope& request,
                    const std::vector<Outgoing>& out);
  /// What a log line about `connection` names: its user, its job and its host.
  common::log::Subject subject(const Connection& connection) const;
  /// accept4 after EMFILE or ENFILE (`error`): with the spare descriptor, the connection waiting
  /// is returned if descriptors were freed meanwhile, else answered an error and closed
  /// (kRefused); without a spare, accepting pauses (kNobodyWaiting, as when nobody waits).
  int accept_with_reserve(int listener, int error);
  void pause_accepting(double seconds);

  Service& service_;
  ServerConfig config_;
  int epoll_ = -1, unix_ = -1, tcp_ = -1, signals_ = -1;
  /// Given up when accept runs out of descriptors, to accept and close the connection waiting.
  int reserve_ = -1;
  double accept_paused_until_ = 0;     ///< listeners out of epoll until then (0: not paused)
  size_t queued_output_ = 0;           ///< unsent bytes of every connection
  std::vector<ConnectionId> resumed_;  ///< see resume_reading
  std::uint16_t tcp_port_ = 0;
  ConnectionId next_id_ = 1;
  std::unordered_map<ConnectionId, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, std::size_t> per_peer_;  ///< connections open, by peer_key
  std::size_t on_probation_ = 0;                           ///< connections on probation
  /// When each connection with no identity must have authenticated, in accept order.
  std::deque<std::pair<double, ConnectionId>> authentication_deadlines_, probation_deadlines_;
};

/// Seconds on the monotonic clock.
double monotonic_seconds();

}  // namespace harmonia::schedd
