// harmonia-bbctl: put, get, drain and status against a harmonia-bbd (docs/buffer-nodes.md).
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <string_view>

#include "common/frames.hpp"
#include "common/identity.hpp"
#include "common/tcp.hpp"
#include "control/bb.pb.h"
#include "control/frame.hpp"

namespace bb = harmonia::bb;
namespace control = harmonia::control;

namespace {

/// A connection to the node: requests out, responses in, in order (several may be in flight).
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}

  /// Sends `request`, with `payload` raw after its frame (Write.payload says how much).
  void send(bb::Request request, std::string_view payload = {}) {
    request.set_seq(++seq_);
    std::string frame;
    harmonia::common::append_frame(frame, request);
    iovec parts[2] = {{frame.data(), frame.size()},
                      {const_cast<char*>(payload.data()), payload.size()}};
    if (!harmonia::common::send_all(fd_, parts, 2))
      throw std::runtime_error("the node closed the connection");
  }

  bb::Response receive() {
    std::uint8_t chunk[1 << 16];
    for (;;) {
      const auto scan = control::scan_frame(input_.data(), input_.size(), 128UL << 20);
      if (scan.kind == control::FrameScan::Kind::Frame) {
        bb::Response response;
        if (!response.ParseFromArray(input_.data() + control::kHeaderBytes,
                                     static_cast<int>(scan.body_length)))
          throw std::runtime_error("malformed response");
        input_.erase(input_.begin(),
                     input_.begin() + static_cast<long>(control::kHeaderBytes + scan.body_length));
        return response;
      }
      if (scan.kind == control::FrameScan::Kind::TooLarge)
        throw std::runtime_error("huge response");
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) throw std::runtime_error("the node closed the connection");
      input_.insert(input_.end(), chunk, chunk + n);
    }
  }

  bb::Response call(const bb::Request& request) {
    send(request);
    return receive();
  }

 private:
  int fd_;
  std::uint64_t seq_ = 0;
  std::vector<std::uint8_t> input_;
};

int report(const bb::Response& response) {
  if (response.code() == bb::Response::OK) return 0;
  std::fprintf(stderr, "harmonia-bbctl: %s: %s\n", bb::Response::Code_Name(response.code()).c_str(),
               response.message().c_str());
  return response.code() == bb::Response::FULL ? 3 : 1;
}

/// The bytes of the file (or pipe) at `path`; throws naming it when it cannot be read.
std::string read_whole(const std::string& path) {
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  std::string data;
  struct stat st {};
  if (fstat(in, &st) == 0 && S_ISREG(st.st_mode))
    data.reserve(static_cast<std::size_t>(st.st_size));
  char piece[1 << 16];
  for (ssize_t n; (n = ::read(in, piece, sizeof(piece))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(in);
      throw std::runtime_error(path + ": " + std::strerror(error));
    }
    data.append(piece, static_cast<std::size_t>(n));
  }
  close(in);
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Talk to a harmonia-bbd buffer node"};
  std::string address, file, local, identity_of;
  std::uint64_t offset = 0, length = 0, chunk = 1 << 20, window = 4;
  cli.add_option("--node", address, "HOST:PORT")->required();
  auto* put =
      cli.add_subcommand("put", "Write a local file's bytes into FILE at OFFSET, in chunks");
  put->add_option("file", file)->required();
  put->add_option("local", local)->required();
  put->add_option("--offset", offset);
  put->add_option("--chunk", chunk)->check(CLI::Range(1UL, 16UL << 20));
  put->add_option("--window", window, "Writes in flight at once")->check(CLI::Range(1UL, 64UL));
  auto* get = cli.add_subcommand("get", "Read a held range to stdout");
  get->add_option("file", file)->required();
  get->add_option("offset", offset)->required();
  get->add_option("length", length)->required();
  get->add_option("--identity-of", identity_of,
                  "Read the range of a staged-in copy, as a reader who sees this PFS file now "
                  "(its size, mtime, ctime and inode: Read.identity)");
  auto* drain = cli.add_subcommand("drain", "Drain FILE (or everything) to the PFS, and wait");
  drain->add_option("file", file);
  auto* status = cli.add_subcommand("status", "The node's state, as JSON");
  cli.require_subcommand(1);
  CLI11_PARSE(cli, argc, argv);
  try {
    Connection node(harmonia::common::connect_tcp(address, "--node"));
    // Who we are, when munged can say it (a node with --auth munge refuses everything else).
    std::string why;
    if (const auto credential = harmonia::common::make_credential(
            "harmonia-bbd", harmonia::common::munge_socket_from_environment(), why)) {
      bb::Request authenticate;
      authenticate.mutable_authenticate()->set_credential(*credential);
      if (const int failed = report(node.call(authenticate))) return failed;
    }
    if (*put) {
      const std::string data = read_whole(local);
      // Prints how many bytes the node acknowledged (from the start, in order), whatever happens.
      std::uint64_t acknowledged = 0;
      int rc = 0;
      const auto started = std::chrono::steady_clock::now();
      try {
        // Up to `window` writes in flight: the node reads the next while it stores this one.
        std::deque<std::uint64_t> in_flight;
        for (std::uint64_t at = 0; rc == 0 && (at < data.size() || !in_flight.empty());) {
          if (at < data.size() && in_flight.size() < window) {
            const std::uint64_t n = std::min<std::uint64_t>(chunk, data.size() - at);
            bb::Request request;
            auto* w = request.mutable_write();
            w->set_file(file);
            w->set_offset(offset + at);
            w->set_payload(n);
            node.send(request, std::string_view(data).substr(at, n));
            in_flight.push_back(n);
            at += n;
            continue;
          }
          rc = report(node.receive());
          if (rc == 0) acknowledged += in_flight.front();
          in_flight.pop_front();
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "harmonia-bbctl: %s\n", error.what());
        rc = 1;
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::printf("{\"acknowledged\": %llu, \"seconds\": %.6f}\n",
                  static_cast<unsigned long long>(acknowledged), seconds);
      return rc;
    }
    bb::Request request;
    if (*get) {
      auto* r = request.mutable_read();
      r->set_file(file);
      r->set_offset(offset);
      r->set_length(length);
      if (!identity_of.empty()) {
        struct stat st {};
        if (stat(identity_of.c_str(), &st) != 0)
          throw std::runtime_error("--identity-of " + identity_of + ": " + std::strerror(errno));
        const auto ns = [](const timespec& t) {
          return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
        };
        auto* seen = r->mutable_identity();
        seen->set_size(static_cast<std::uint64_t>(st.st_size));
        seen->set_mtime_ns(ns(st.st_mtim));
        seen->set_ctime_ns(ns(st.st_ctim));
        seen->set_inode(static_cast<std::uint64_t>(st.st_ino));
      }
      const bb::Response response = node.call(request);
      if (const int rc = report(response); rc != 0) return rc;
      std::fwrite(response.data().data(), 1, response.data().size(), stdout);
      return 0;
    }
    if (*drain) {
      request.mutable_drain()->set_file(file);
      return report(node.call(request));
    }
    if (*status) {
      request.mutable_status();
      const bb::Response response = node.call(request);
      std::string text;
      google::protobuf::util::JsonPrintOptions options;
      options.always_print_primitive_fields = true;
      options.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(response.status(), &text, options);
      std::cout << text << "\n";
      return report(response);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-bbctl: %s\n", error.what());
    return 1;
  }
  return 0;
}
