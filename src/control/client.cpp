#include "control/client.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/frames.hpp"
#include "common/identity.hpp"
#include "common/tcp.hpp"
#include "control/frame.hpp"

namespace harmonia::control {

namespace {

std::runtime_error failure(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

int connect_unix(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    throw std::runtime_error("socket path " + path + " is too long");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const auto error = failure("cannot connect to " + path);
    if (fd >= 0) close(fd);
    throw error;
  }
  return fd;
}

}  // namespace

Client::Client(const std::string& address) {
  if (address.rfind("tcp:", 0) != 0) {
    fd_ = connect_unix(address.rfind("unix:", 0) == 0 ? address.substr(5) : address);
    return;  // the daemon reads who we are from the socket
  }
  fd_ = common::connect_tcp(address.substr(4), "tcp:");
  // Over TCP a MUNGE credential says who we are; without munged none is sent, and a daemon that
  // requires one refuses the requests (UNAUTHENTICATED, naming why).
  std::string why;
  const auto credential =
      common::make_credential("harmonia-schedd", common::munge_socket_from_environment(), why);
  if (!credential) return;
  Envelope request;
  request.mutable_authenticate()->set_credential(*credential);
  const Envelope reply = call(std::move(request));
  if (reply.has_error()) {
    close(fd_);
    fd_ = -1;
    throw std::runtime_error("harmonia-schedd refused our MUNGE credential: " +
                             reply.error().message());
  }
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

void Client::send(Envelope request) {
  if (request.seq() == 0) request.set_seq(next_seq_++);
  std::string frame;
  common::append_frame(frame, request);
  if (!common::send_all(fd_, frame)) throw failure("send to harmonia-schedd");
}

Envelope Client::receive() {
  for (;;) {
    const auto scan = control::scan_frame(input_.data(), input_.size(), control::kMaxReplyBytes);
    if (scan.kind == control::FrameScan::Kind::TooLarge)
      throw std::runtime_error("harmonia-schedd sent a frame of " +
                               std::to_string(scan.body_length) + " bytes");
    if (scan.kind == control::FrameScan::Kind::Frame) {
      Envelope reply;
      const bool ok = reply.ParseFromArray(input_.data() + control::kHeaderBytes,
                                           static_cast<int>(scan.body_length));
      input_.erase(input_.begin(),
                   input_.begin() + static_cast<long>(control::kHeaderBytes + scan.body_length));
      if (!ok) throw std::runtime_error("harmonia-schedd sent a malformed frame");
      return reply;
    }
    std::uint8_t chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw failure("receive from harmonia-schedd");
    if (n == 0) throw std::runtime_error("harmonia-schedd closed the connection");
    input_.insert(input_.end(), chunk, chunk + n);
  }
}

Envelope Client::call(Envelope request) {
  request.set_seq(next_seq_++);
  const std::uint64_t seq = request.seq();
  send(std::move(request));
  for (;;) {
    Envelope reply = receive();
    if (reply.seq() == seq) return reply;
  }
}

}  // namespace harmonia::control
