// harmonia-bbd: a buffer node (docs/buffer-nodes.md). Clients write into its store over TCP; it
// drains to the PFS when it is full enough or asked to, and recovers its logs after a crash.
#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "bbd/metrics.hpp"
#include "bbd/monitor.hpp"
#include "bbd/requests.hpp"
#include "bbd/store.hpp"
#include "common/frames.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "common/tcp.hpp"
#include "config/site.hpp"
#include "control/bb.pb.h"
#include "control/frame.hpp"

using namespace harmonia::bbd;
namespace bb = harmonia::bb;
namespace control = harmonia::control;
namespace logging = harmonia::common::log;

namespace {

bool send_message(int fd, const bb::Response& response) {
  std::string frame;
  harmonia::common::append_frame(frame, response);
  return harmonia::common::send_all(fd, frame);
}

/// Seconds as %g writes them.
std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The host part of HOST:PORT.
std::string host_of(const std::string& spec) {
  const auto colon = spec.rfind(':');
  return colon == std::string::npos ? spec : spec.substr(0, colon);
}

/// Requests being served now (the monitor's queue depth).
std::atomic<unsigned> in_flight{0};
/// Client connections open now (each holds a descriptor and two threads).
std::atomic<unsigned> open_connections{0};

/// How a node protects itself from its clients (docs/limits.md).
struct Limits {
  unsigned max_connections = 512;
  int idle_timeout_ms = 300'000;  ///< 0: never
  /// Connections one peer (one user, or one address before it authenticates) may hold, and the
  /// slots only root and the administrators may take: nobody can take every slot.
  unsigned per_peer = 64;
  unsigned reserved = 16;
};

/// Connections open now per peer (limits.per_peer), and on probation.
std::mutex peers_mutex;
std::map<std::string, unsigned> open_per_peer;
unsigned open_on_probation = 0;

/// This node's address (as clients know it), for log lines.
std::string node_name;

/// Logs LINE (a warning: a resource ran out, or a request was refused) at most once a second
/// per `kind` of line, saying how many were left out since (a client opening connections in a
/// loop must not fill the log).
void log_limited(int kind, const std::string& line, harmonia::common::log::Subject subject = {}) {
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point last[5];
  static unsigned skipped[5];
  std::lock_guard lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  if (last[kind].time_since_epoch().count() != 0 && now - last[kind] < std::chrono::seconds(1)) {
    ++skipped[kind];
    return;
  }
  last[kind] = now;
  subject.node = node_name;
  harmonia::common::log::warning(
      skipped[kind] > 0
          ? line + " (and " + std::to_string(skipped[kind]) + " more since the last such line)"
          : line,
      subject);
  skipped[kind] = 0;
}
enum LogKind { kDescriptors = 0, kTooMany = 1, kThreads = 2, kMemory = 3, kRefused = 4 };

/// An ERROR response a connection gets before it is closed for want of resources.
bb::Response refusal(const std::string& why) {
  bb::Response refused;
  refused.set_code(bb::Response::ERROR);
  refused.set_message(why);
  return refused;
}

/// Sends `response` without waiting (a new connection's socket buffer is empty), then closes.
void refuse_and_close(int fd, const bb::Response& response) {
  std::string frame;
  harmonia::common::append_frame(frame, response);
  (void)::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  close(fd);
}

/// Bytes received into memory that grows as they arrive, never to a size a peer only announced.
struct Buffer {
  std::unique_ptr<char[]> data;
  std::size_t capacity = 0;

  /// Room for `size` bytes, keeping the first `kept`; no zeroing: every byte is received.
  void reserve(std::size_t size, std::size_t kept) {
    if (size <= capacity) return;
    const std::size_t grown = std::max(size, capacity * 2);
    auto bigger = std::make_unique_for_overwrite<char[]>(grown);
    if (kept > 0) std::memcpy(bigger.get(), data.get(), kept);
    data = std::move(bigger);
    capacity = grown;
  }
  /// Gives memory back after a large request, keeping what a typical one needs.
  void trim(std::size_t keep) {
    if (capacity > keep) {
      data.reset();
      capacity = 0;
    }
  }
};

/// The first piece of a frame or payload read into memory; then at most as much again as
/// arrived (the buffer doubles only as its bytes come in).
constexpr std::size_t kFirstPiece = 64 * 1024;
/// Before a connection has an identity (a TCP peer on another host, which must send a MUNGE
/// credential first): its frames may be this large at most, carry no payload, and must come
/// within this many milliseconds. Nothing larger is read into memory for an unknown peer.
constexpr std::size_t kMaxUnauthenticatedFrame = 4096;
constexpr int kAuthenticateWithinMs = 10'000;
/// A connection let in on probation (Admission) must authenticate within this many milliseconds.
constexpr int kProbationWithinMs = 2'000;

/// One client connection's socket, with the idle timeout its reads and writes obey.
struct Peer {
  int fd;
  int idle_timeout_ms;
  int authenticate_within_ms = kAuthenticateWithinMs;
  /// The worker is answering a request: the client waits for it, so its silence is not idleness.
  std::atomic<bool> busy{false};
  /// The connection has an identity: until then its requests are small and must come soon.
  std::atomic<bool> authenticated{false};

  /// Receives exactly `length` bytes; false at the end of the stream, on an error, or when no byte
  /// came for the idle timeout while no request was being answered (an idle client, or a sender
  /// stalled in the middle of a frame).
  bool receive(char* data, std::size_t length) {
    return harmonia::common::receive_all(fd, data, length, [this] { return readable_in_time(); });
  }

  /// Waits until the socket has bytes (or its end); false after the idle timeout passed with
  /// nothing to read and no request being answered.
  bool readable_in_time() {
    // A connection that has not authenticated gets a short while to do it, whatever the idle
    // timeout: a slot held by a peer that never says who it is is a slot taken from the others.
    const int limit = authenticated.load() ? idle_timeout_ms : authenticate_within_ms;
    if (limit <= 0) return true;
    for (;;) {
      pollfd wait{fd, POLLIN, 0};
      const int ready = poll(&wait, 1, limit);
      if (ready > 0 || (ready < 0 && errno != EINTR)) return true;  // recv tells which
      if (ready == 0 && !busy.load()) return false;
    }
  }

  /// Receives `length` bytes into `buffer` (from its start), growing it as they arrive.
  bool receive_growing(Buffer& buffer, std::size_t length) {
    buffer.reserve(std::max<std::size_t>(1, std::min(length, kFirstPiece)), 0);
    std::size_t got = 0;
    while (got < length) {
      const std::size_t next = std::min(length, std::max(kFirstPiece, 2 * got));
      buffer.reserve(next, got);
      if (!receive(buffer.data.get() + got, next - got)) return false;
      got = next;
    }
    return true;
  }
};

/// The refusal of what a connection with no identity sent before authenticating (then closed).
bb::Response unauthenticated(const std::string& what) {
  bb::Response refused;
  refused.set_code(bb::Response::UNAUTHENTICATED);
  refused.set_message(what + " before Authenticate: this connection has no identity (send a " +
                      "MUNGE credential first)");
  return refused;
}

/// One request read off a connection, for the connection's worker.
struct Received {
  bb::Request request;
  Buffer payload;                       ///< a write's raw bytes (Write.payload of them)
  std::optional<bb::Response> refusal;  ///< answered without the store (malformed, oversized)
  bool last = false;                    ///< the connection ends after this one
};

/// Reads the next request of `peer` into `slot`.
void read_request(Peer& peer, Buffer& body, Received& slot) {
  std::uint8_t header[control::kHeaderBytes];
  std::size_t length = 0;
  long long raw = 0;
  const bool known = peer.authenticated.load();
  const std::size_t most = known ? kMaxRequestBytes : kMaxUnauthenticatedFrame;
  if (!peer.receive(reinterpret_cast<char*>(header), sizeof(header))) {
    slot.last = true;
  } else if ((length = control::frame_length(header)) > most) {
    slot.refusal = known ? refuse_oversized("frame", length, most)
                         : unauthenticated("a frame of " + std::to_string(length) + " bytes");
    slot.last = true;  // the stream cannot be resynchronised
  } else if (!peer.receive_growing(body, length)) {
    slot.last = true;
  } else if (!slot.request.ParseFromArray(body.data.get(), static_cast<int>(length))) {
    slot.refusal = malformed();
  } else if ((raw = payload_bytes(slot.request)) < 0) {
    slot.refusal = refuse_oversized(
        "payload", static_cast<std::size_t>(slot.request.write().payload()), kMaxPayloadBytes);
    slot.last = true;
  } else if (raw > 0 && !known) {
    slot.refusal = unauthenticated("a write's payload");
    slot.last = true;  // its bytes are never read
  } else if (raw > 0 && !peer.receive_growing(slot.payload, static_cast<std::size_t>(raw))) {
    slot.last = true;
  }
  body.trim(kFirstPiece);  // a Write's data comes as a payload: large bodies are rare
}

/// Where a connection's slot counts (Limits): under its user once the node knows it, under its
/// address until then.
struct Admission {
  std::string key;          ///< "uid N" or "address HOST" (common::peer_key); empty: nowhere
  bool privileged = false;  ///< root or an administrator: no bound but --max-connections
  /// Let in past a bound that holds for peers with no identity yet (the connections of its
  /// address before they authenticate, or the slots kept for root and the administrators): its
  /// first request must be an Authenticate, within kProbationWithinMs, that names a user the
  /// bound does not hold back; else it gets `refusal` and is closed. At most `limits.reserved`
  /// connections are on probation at once.
  bool probation = false;
  std::string refusal;
};

/// Why the connection of `admission` may not have a slot (empty: it may), with `others`
/// connections open besides it; `reserved`: whether the slots kept for root and the
/// administrators are out of its reach. The caller holds peers_mutex.
std::string bound_reached(const Admission& admission, const Limits& limits, unsigned others,
                          bool reserved) {
  if (admission.privileged) return {};
  if (reserved && others + limits.reserved >= limits.max_connections)
    return "its last " + std::to_string(limits.reserved) +
           " connections are kept for root and the administrators";
  if (const auto held = open_per_peer.find(admission.key);
      held != open_per_peer.end() && held->second >= limits.per_peer)
    return "too many connections from " + admission.key +
           (admission.key.rfind("uid ", 0) == 0 ? "" : " before they authenticate") + " (at most " +
           std::to_string(limits.per_peer) + " each)";
  return {};
}

/// Takes a slot for a new connection, known to the kernel as `known` or not; the refusal when
/// there is none. `credentials`: a peer with no identity may still authenticate (--auth munge).
std::optional<std::string> admit(Admission& admission, const Limits& limits, const Access& access,
                                 const std::optional<harmonia::common::Identity>& known,
                                 bool credentials) {
  std::lock_guard lock(peers_mutex);
  const unsigned open = open_connections.load();
  if (open >= limits.max_connections)
    return "too many connections (at most " + std::to_string(limits.max_connections) +
           ", --max-connections)";
  admission.privileged = known && access.admins.contains(known->uid);
  if (std::string why = bound_reached(admission, limits, open, true); !why.empty()) {
    // A peer that may still say who it is gets its chance: root, or a user of a busy host.
    if (known || !credentials || open_on_probation >= limits.reserved) return why;
    admission.probation = true;
    admission.refusal = std::move(why);
    admission.key.clear();
    ++open_on_probation;
  } else {
    ++open_per_peer[admission.key];
  }
  open_connections.fetch_add(1);
  return {};
}

/// Stops counting the connection of `admission` anywhere but in open_connections. The caller
/// holds peers_mutex.
void uncount(Admission& admission) {
  if (admission.probation)
    --open_on_probation;
  else if (!admission.key.empty() && --open_per_peer[admission.key] == 0)
    open_per_peer.erase(admission.key);
  admission.probation = false;
  admission.key.clear();
}

/// The connection of `admission` has authenticated as `who`: it counts under that user from now
/// on. The refusal when that user may not have it (the user's bound, or the slots kept for
/// root), the connection then counting nowhere until it closes.
std::optional<std::string> settle(Admission& admission, const Limits& limits, const Access& access,
                                  const harmonia::common::Identity& who) {
  std::lock_guard lock(peers_mutex);
  const bool probation = admission.probation;
  uncount(admission);
  admission.key = harmonia::common::peer_key(-1, who.uid);
  admission.privileged = access.admins.contains(who.uid);
  // On probation it may hold a slot kept for root; otherwise it had one of the others.
  std::string why = bound_reached(admission, limits, open_connections.load() - 1, probation);
  if (!why.empty()) {
    admission.key.clear();
    return why;
  }
  ++open_per_peer[admission.key];
  return {};
}

void release(Admission& admission) {
  std::lock_guard lock(peers_mutex);
  open_connections.fetch_sub(1);
  uncount(admission);
}

/// One client connection: frames in, one response each, in order. Two stages: this thread reads
/// requests (frames and raw payloads, into buffers that grow as their bytes arrive) while a worker
/// stores the previous one and answers it; two buffers go round between them.
void serve(Store& store, int fd, const Limits& limits, const Access& access,
           std::optional<harmonia::common::Identity> known, Admission& admission) {
  Peer peer{fd, limits.idle_timeout_ms,
            admission.probation ? kProbationWithinMs : kAuthenticateWithinMs};
  // The worker's: the kernel's word for a peer on this host, else an Authenticate sets it.
  Session session{known};
  peer.authenticated = known.has_value();
  if (limits.idle_timeout_ms > 0) {  // a client that stops reading its replies times out too
    const timeval timeout{limits.idle_timeout_ms / 1000, (limits.idle_timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::unique_ptr<Received>> full, empty;
  for (int k = 0; k < 2; ++k) empty.push_back(std::make_unique<Received>());
  std::thread worker;
  try {
    worker = std::thread([&] {
      for (;;) {
        std::unique_ptr<Received> next;
        {
          std::unique_lock lock(mutex);
          changed.wait(lock, [&] { return !full.empty(); });
          next = std::move(full.front());
          full.pop_front();
        }
        bool ok = true, ending = false;
        try {
          if (next->last && !next->refusal) {
            ok = false;  // the connection ended, mid-request or between requests: no answer
          } else if (next->refusal) {
            ok = send_message(fd, *next->refusal);
          } else {
            const auto raw = static_cast<std::size_t>(payload_bytes(next->request));
            in_flight.fetch_add(1);
            peer.busy.store(true);
            bb::Response response;
            try {
              const bool had_identity = session.who.has_value();
              if (admission.probation && !next->request.has_authenticate()) {
                log_limited(kTooMany, admission.refusal + ": connection refused (no credential)");
                response = refusal("the node is busy: " + admission.refusal);
              } else {
                response = answer(store, access, session, next->request,
                                  std::string_view(next->payload.data.get(), raw));
                if (!had_identity && session.who) {
                  if (const auto why = settle(admission, limits, access, *session.who)) {
                    log_limited(kTooMany,
                                *why + ": connection of uid " + std::to_string(session.who->uid) +
                                    " refused",
                                {"", session.who->uid, ""});
                    response = refusal("the node is busy: " + *why);
                    session.who.reset();
                  }
                }
              }
              response.set_seq(next->request.seq());
              // A connection on probation, or refused its slot, has had its one chance.
              ending =
                  admission.probation || (!had_identity && !session.who && admission.key.empty());
              if (session.who) peer.authenticated = true;
              if (response.code() == bb::Response::UNAUTHENTICATED ||
                  response.code() == bb::Response::FORBIDDEN)
                log_limited(
                    kRefused,
                    "refused a request of " +
                        (session.who ? "uid " + std::to_string(session.who->uid)
                                     : std::string("a connection with no identity")) +
                        ": " + response.message(),
                    {next->request.has_write() ? next->request.write().job() : "",
                     session.who ? std::optional<uid_t>(session.who->uid) : std::nullopt, ""});
            } catch (const std::bad_alloc&) {
              log_limited(kMemory, "out of memory answering a request: refused");
              response = refusal("the node is out of memory");
              response.set_seq(next->request.seq());
            }
            peer.busy.store(false);
            in_flight.fetch_sub(1);
            ok = send_message(fd, response) && !ending;
          }
        } catch (const std::bad_alloc&) {  // not even the reply fits: this connection ends
          log_limited(kMemory, "out of memory sending a reply: connection closed");
          ok = false;
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
  } catch (const std::system_error& error) {
    log_limited(kThreads, std::string("cannot start a connection's worker thread (") +
                              error.what() + "): connection refused");
    refuse_and_close(fd, refusal("the node cannot start a thread for this connection"));
    return;
  }
  Buffer body;
  for (bool last = false; !last;) {
    std::unique_ptr<Received> slot;
    {
      // Until the connection has an identity, one request at a time: the next is read with the
      // limits of an unknown peer or of the user an Authenticate just named, not of a guess.
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return peer.authenticated ? !empty.empty() : empty.size() == 2; });
      slot = std::move(empty.front());
      empty.pop_front();
    }
    slot->refusal.reset();
    slot->last = false;
    try {
      read_request(peer, body, *slot);
    } catch (const std::bad_alloc&) {
      log_limited(kMemory, "out of memory reading a request: connection closed");
      body = Buffer{};
      slot->payload = Buffer{};
      slot->refusal = refusal("the node is out of memory");
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

/// Serves `fd` on a thread of its own, counted in open_connections; refuses it (an ERROR reply,
/// then closed) beyond `limits.max_connections` or when no thread can be started.
void start_connection(Store& store, int fd, const Limits& limits, const Access& access) {
  // Who it is, when the kernel says (--auth peer: a client on this host); with --auth munge a
  // client says so with a credential. The key its connections count under until then.
  const bool credentials = static_cast<bool>(access.check_credential);
  const auto known = credentials ? std::nullopt : harmonia::common::peer_identity(fd);
  Admission admission;
  admission.key =
      harmonia::common::peer_key(fd, known ? std::optional<uid_t>(known->uid) : std::nullopt);
  if (const auto why = admit(admission, limits, access, known, credentials)) {
    log_limited(kTooMany, *why + ": connection of " + admission.key + " refused",
                {"", known ? std::optional<uid_t>(known->uid) : std::nullopt, ""});
    refuse_and_close(fd, refusal("the node is busy: " + *why));
    return;
  }
  try {
    std::thread([&store, fd, &limits, &access, known, admission]() mutable {
      serve(store, fd, limits, access, known, admission);
      release(admission);
    }).detach();
  } catch (const std::system_error& error) {
    release(admission);
    log_limited(kThreads, std::string("cannot start a connection thread (") + error.what() +
                              "): connection refused");
    refuse_and_close(fd, refusal("the node cannot start a thread for this connection"));
  }
}

/// A descriptor kept open to be given up when accept runs out of them: the connection waiting
/// is then accepted, refused and closed (not left in the backlog, which keeps the listening
/// socket readable).
class Reserve {
 public:
  Reserve() { reopen(); }
  bool held() const { return fd_ >= 0; }
  void release() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void reopen() {
    if (fd_ < 0) fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }

 private:
  int fd_ = -1;
};

/// Accepts connections for ever. Out of descriptors or memory, it refuses new connections with
/// a logged error and keeps serving the open ones; only an unusable listening socket throws.
[[noreturn]] void accept_loop(Store& store, int listener, const Limits& limits,
                              const Access& access) {
  Reserve reserve;
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      start_connection(store, fd, limits, access);
      continue;
    }
    const int error = errno;
    switch (error) {
      case EMFILE:
      case ENFILE: {
        if (reserve.held()) {
          reserve.release();
          // Blocks until a connection comes (accept fails for want of a descriptor before it
          // looks at the queue), then takes the spare descriptor again.
          const int waiting = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
          reserve.reopen();
          if (waiting >= 0 && reserve.held()) {  // descriptors were freed meanwhile: serve it
            const int yes = 1;
            setsockopt(waiting, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
            start_connection(store, waiting, limits, access);
            break;
          }
          log_limited(kDescriptors,
                      std::string("accept: ") + std::strerror(error) + " (" +
                          std::to_string(open_connections.load()) +
                          " connections open): new connections refused until some close");
          if (waiting >= 0)
            refuse_and_close(waiting, refusal(std::string("the node is out of file descriptors (") +
                                              std::strerror(error) + ")"));
          reserve.reopen();  // the refused connection's descriptor
        }
        if (!reserve.held()) {  // others took it: wait for descriptors to be closed
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          reserve.reopen();
        }
        break;
      }
      case ENOBUFS:
      case ENOMEM:
        log_limited(kMemory,
                    std::string("accept: ") + std::strerror(error) + ": new connections wait");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        break;
      case EINTR:
      case ECONNABORTED:
      case EPROTO:  // errors of the connection being accepted (accept(2)): take the next one
      case ENETDOWN:
      case ENOPROTOOPT:
      case EHOSTDOWN:
      case ENONET:
      case EHOSTUNREACH:
      case EOPNOTSUPP:
      case ENETUNREACH:
      case EPERM:  // refused by a firewall rule
        break;
      default:
        throw std::runtime_error(std::string("accept: ") + std::strerror(error));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Harmonia buffer node: stores writes on its device and drains them to the PFS"};
  static harmonia::config::Site site;
  auto settings = harmonia::config::declare(site, {});
  settings.add_options(cli, harmonia::common::kNode);
  CLI11_PARSE(cli, argc, argv);
  auto errors = settings.apply(harmonia::common::kNode);
  const auto& node = site.node;
  const auto& shared = site.shared;
  if (errors.empty() && settings.show_requested()) {
    std::cout << settings.show(harmonia::common::kNode);
    return 0;
  }
  if (errors.empty() && (node.device.empty() || node.pfs.empty()))
    errors.push_back(
        "a node needs its device directory and the PFS directory it drains to "
        "(--device and --pfs, or device and pfs in [bbd])");
  if (!errors.empty()) {
    for (const auto& line : errors) std::fprintf(stderr, "harmonia-bbd: %s\n", line.c_str());
    return 2;
  }
  logging::configure("harmonia-bbd", shared.log_target, shared.log_level);
  static Limits limits;  // outlives the detached connection threads
  static Access access;  // outlives the detached connection threads
  access.admins.uids = shared.admin_uids;
  static harmonia::common::CredentialChecker checker("harmonia-bbd", shared.munge_socket,
                                                     shared.auth_window);
  // Clients send a credential wherever munged makes one, also to a node that knows them from
  // the kernel: it may confirm their user there, never name another.
  access.confirm_credential = [](uid_t known, const std::string& credential, std::string& why) {
    return checker.confirms(known, credential, why);
  };
  if (shared.auth == "munge")
    access.check_credential = [](const std::string& credential, std::string& why) {
      return checker.check(credential, why);
    };
  google::protobuf::SetLogHandler(nullptr);
  // One descriptor per connection and per open log: raise the soft limit to the hard one.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const auto descriptors = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                               ? static_cast<unsigned long long>(files.rlim_cur)
                               : 1ULL << 20;
  limits.max_connections = node.max_connections > 0
                               ? node.max_connections
                               : static_cast<unsigned>(std::clamp(descriptors / 2, 1ULL, 512ULL));
  limits.reserved = std::min(16U, limits.max_connections / 4);
  limits.per_peer = std::max(1U, std::min(64U, (limits.max_connections - limits.reserved) / 2));
  limits.idle_timeout_ms = static_cast<int>(std::lround(node.idle_timeout * 1000));
  if (node.idle_timeout > 0 && limits.idle_timeout_ms == 0) limits.idle_timeout_ms = 1;
  signal(SIGPIPE, SIG_IGN);
  try {
    Store store(node.device, node.pfs, node.capacity, node.drain_scheduler);
    if (node.sync == "data") store.sync_writes();
    std::uint16_t port = 0;
    const int listener = harmonia::common::listen_tcp(node.listen, "--listen", 0, port);
    // No request is served without an identity: a node that may not learn its clients' users
    // from the kernel must have them authenticate.
    if (shared.auth != "munge" && !harmonia::common::loopback_only(listener)) {
      logging::error("--listen " + node.listen +
                     ": not a loopback address, and clients on other hosts can only say who "
                     "they are with a MUNGE credential: start with --auth munge (or listen on "
                     "127.0.0.1)");
      return 2;
    }
    const std::string advertise =
        node.advertise.empty() ? host_of(node.listen) + ":" + std::to_string(port) : node.advertise;
    node_name = advertise;
    const NodeLoad started{0, 0, unix_seconds()};
    std::unique_ptr<harmonia::common::metrics::Endpoint> endpoint;
    if (!node.metrics.empty())
      endpoint = std::make_unique<harmonia::common::metrics::Endpoint>(
          node.metrics, "--metrics", [&store, started] {
            NodeLoad load = started;
            load.connections = open_connections.load();
            load.in_flight = in_flight.load();
            return render_metrics(store.stats(), load);
          });
    std::printf("port=%u\n", port);
    if (endpoint) std::printf("metrics_port=%d\n", endpoint->port());
    std::fflush(stdout);
    const auto held = store.held();
    logging::info(std::to_string(held.size()) + " files recovered, " +
                  std::to_string(store.stats().used) + " bytes held of " +
                  std::to_string(node.capacity));
    logging::info("at most " + std::to_string(limits.max_connections) +
                  " connections (--max-connections), " + std::to_string(limits.per_peer) +
                  " per user, " + std::to_string(limits.reserved) +
                  " kept for root and administrators, " + std::to_string(descriptors) +
                  " descriptors (RLIMIT_NOFILE), idle timeout " + seconds_text(node.idle_timeout) +
                  " s (--idle-timeout), auth " + shared.auth +
                  (endpoint ? ", metrics on http://" + endpoint->address() + "/metrics" : "") +
                  (settings.config_path().empty() ? "" : "; " + settings.config_path()));
    if (geteuid() != 0)
      logging::info("runs as uid " + std::to_string(geteuid()) +
                    ", not root: it writes and "
                    "drains for uid " +
                    std::to_string(geteuid()) + " alone (other users' requests are refused)");
    store.set_fence_node(advertise);
    Monitor monitor(store, node.schedd, advertise, node.threshold, in_flight);
    if (!node.schedd.empty())
      access.publish = [&monitor](std::string& why) { return monitor.publish(why); };
    monitor.start();
    accept_loop(store, listener, limits, access);
  } catch (const std::exception& error) {
    logging::error(error.what(), {"", std::nullopt, node_name});
    return 2;
  }
}
