#pragma once
/// @file A blocking client of harmonia-schedd for the buffer nodes' monitors, tools, tests and
/// benchmarks (the agent inside libharmonia has its own, in C, so as not to bring libprotobuf into
/// applications). It depends on the protocol alone, so a node links no part of the scheduler.

#include <cstdint>
#include <string>
#include <vector>

#include "control/control.pb.h"

namespace harmonia::control {

class Client {
 public:
  /// Connects to "unix:PATH", "tcp:HOST:PORT" or a bare socket path; throws std::runtime_error.
  explicit Client(const std::string& address);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends `request` (its seq set by the client) and returns its reply; pushed directives that
  /// arrive first are skipped. Throws std::runtime_error when the connection fails.
  Envelope call(Envelope request);
  /// Sends without waiting (pipelining); read the replies with `receive`.
  void send(Envelope request);
  Envelope receive();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::uint64_t next_seq_ = 1;
  std::vector<std::uint8_t> input_;
};

}  // namespace harmonia::control
