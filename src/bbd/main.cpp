// harmonia-bbd: a buffer node (docs/buffer-nodes.md). Clients write into its store over TCP; it
// drains to the PFS when it is full enough or asked to, and recovers its logs after a crash.
#include <google/protobuf/stubs/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bbd/bb.pb.h"
#include "bbd/monitor.hpp"
#include "bbd/requests.hpp"
#include "bbd/store.hpp"
#include "common/frames.hpp"
#include "common/size.hpp"
#include "common/tcp.hpp"
#include "control/frame.hpp"

using namespace harmonia::bbd;
namespace bb = harmonia::bb;
namespace control = harmonia::control;

namespace {

bool send_message(int fd, const bb::Response& response) {
  std::string frame;
  harmonia::common::append_frame(frame, response);
  return harmonia::common::send_all(fd, frame);
}

/// The host part of HOST:PORT.
std::string host_of(const std::string& spec) {
  const auto colon = spec.rfind(':');
  return colon == std::string::npos ? spec : spec.substr(0, colon);
}

/// Requests being served now (the monitor's queue depth).
std::atomic<unsigned> in_flight{0};

/// One request read off a connection, for the connection's worker.
struct Received {
  bb::Request request;
  std::unique_ptr<char[]> payload;  ///< a write's raw bytes (Write.payload of them)
  std::size_t capacity = 0;
  std::optional<bb::Response> refusal;  ///< answered without the store (malformed, oversized)
  bool last = false;                    ///< the connection ends after this one
};

/// One client connection: frames in, one response each, in order. Two stages: this thread reads
/// requests (frames and raw payloads, straight into buffers of their size) while a worker stores
/// the previous one and answers it; two buffers go round between them.
void serve(Store& store, int fd) {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::unique_ptr<Received>> full, empty;
  for (int k = 0; k < 2; ++k) empty.push_back(std::make_unique<Received>());
  std::thread worker([&] {
    for (;;) {
      std::unique_ptr<Received> next;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return !full.empty(); });
        next = std::move(full.front());
        full.pop_front();
      }
      bool ok = true;
      if (next->last && !next->refusal) {
        ok = false;  // the connection ended, mid-request or between requests: nothing to answer
      } else if (next->refusal) {
        ok = send_message(fd, *next->refusal);
      } else {
        const auto raw = static_cast<std::size_t>(payload_bytes(next->request));
        in_flight.fetch_add(1);
        const bb::Response response =
            answer(store, next->request, std::string_view(next->payload.get(), raw));
        in_flight.fetch_sub(1);
        ok = send_message(fd, response);
      }
      const bool last = next->last || !ok;
      if (!ok) shutdown(fd, SHUT_RDWR);  // a peer gone: the reader's next receive ends too
      {
        std::lock_guard lock(mutex);
        empty.push_back(std::move(next));
      }
      changed.notify_all();
      if (last) return;
    }
  });
  std::string body;
  for (bool last = false; !last;) {
    std::unique_ptr<Received> slot;
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return !empty.empty(); });
      slot = std::move(empty.front());
      empty.pop_front();
    }
    slot->refusal.reset();
    slot->last = false;
    std::uint8_t header[control::kHeaderBytes];
    std::size_t length = 0;
    long long raw = 0;
    if (!harmonia::common::receive_all(fd, reinterpret_cast<char*>(header), sizeof(header))) {
      slot->last = true;
    } else if ((length = control::frame_length(header)) > kMaxRequestBytes) {
      slot->refusal = refuse_oversized("frame", length, kMaxRequestBytes);
      slot->last = true;  // the stream cannot be resynchronised
    } else if (body.resize(length), !harmonia::common::receive_all(fd, body.data(), length)) {
      slot->last = true;
    } else if (!slot->request.ParseFromString(body)) {
      slot->refusal = answer(store, body);  // MALFORMED
    } else if ((raw = payload_bytes(slot->request)) < 0) {
      slot->refusal = refuse_oversized(
          "payload", static_cast<std::size_t>(slot->request.write().payload()), kMaxPayloadBytes);
      slot->last = true;
    } else {
      if (static_cast<std::size_t>(raw) > slot->capacity) {
        slot->capacity = static_cast<std::size_t>(raw);
        slot->payload.reset(new char[slot->capacity]);  // no zeroing: every byte is received
      }
      if (raw > 0 &&
          !harmonia::common::receive_all(fd, slot->payload.get(), static_cast<std::size_t>(raw)))
        slot->last = true;
    }
    last = slot->last;
    {
      std::lock_guard lock(mutex);
      full.push_back(std::move(slot));
    }
    changed.notify_all();
  }
  worker.join();
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Harmonia buffer node: stores writes on its device and drains them to the PFS"};
  std::string device, pfs, listen_on = "127.0.0.1:0", capacity_text = "1G";
  double threshold = 0.5;
  cli.add_option("--device", device, "Directory on the node's device for the logs")->required();
  cli.add_option("--pfs", pfs, "PFS directory drained files go to")->required();
  cli.add_option("--capacity", capacity_text, "Bytes held at most (4096, 64M, 1G)")
      ->capture_default_str();
  cli.add_option("--listen", listen_on, "HOST:PORT (port 0: any, printed as port=N)")
      ->capture_default_str();
  cli.add_option("--threshold", threshold,
                 "Drain in the background once this share of the capacity is used (0..1; 1: "
                 "only when asked)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  std::string schedd, advertise, drain_scheduler = "fifo";
  cli.add_option("--schedd", schedd,
                 "Scheduler daemon to report to and take drain orders from (unix:PATH or "
                 "tcp:HOST:PORT); without it the node drains at --threshold");
  cli.add_option("--advertise", advertise,
                 "HOST:PORT clients reach this node at (default: the --listen host and port)");
  cli.add_option("--drain-scheduler", drain_scheduler,
                 "Request scheduler that picks the next file to drain (fifo, sjf, hbrr, ...)")
      ->capture_default_str();
  std::string sync = "none";
  cli.add_option("--sync", sync,
                 "When a write is acknowledged: none (in the page cache: survives a killed node) "
                 "or data (fdatasync of the log first: survives a power loss)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "data"}));
  CLI11_PARSE(cli, argc, argv);
  google::protobuf::SetLogHandler(nullptr);
  signal(SIGPIPE, SIG_IGN);
  const auto capacity = harmonia::common::parse_size(capacity_text);
  if (!capacity) {
    std::fprintf(stderr, "harmonia-bbd: --capacity %s: expected a size such as 64M or 1G\n",
                 capacity_text.c_str());
    return 2;
  }
  try {
    Store store(device, pfs, *capacity, drain_scheduler);
    if (sync == "data") store.sync_writes();
    std::uint16_t port = 0;
    const int listener = harmonia::common::listen_tcp(listen_on, "--listen", 0, port);
    std::printf("port=%u\n", port);
    std::fflush(stdout);
    const auto held = store.held();
    std::fprintf(stderr, "harmonia-bbd: %zu files recovered, %llu bytes held of %llu\n",
                 held.size(), static_cast<unsigned long long>(store.stats().used),
                 static_cast<unsigned long long>(*capacity));
    if (advertise.empty()) advertise = host_of(listen_on) + ":" + std::to_string(port);
    store.set_fence_node(advertise);
    Monitor monitor(store, schedd, advertise, threshold, in_flight);
    monitor.start();
    for (;;) {
      const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        throw std::runtime_error(std::string("accept: ") + std::strerror(errno));
      }
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      std::thread([&store, fd] { serve(store, fd); }).detach();
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-bbd: %s\n", error.what());
    return 2;
  }
}
