#include "runtime/bbio/buffer_client.hpp"

#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "common/frames.hpp"
#include "common/identity.hpp"
#include "control/bb.pb-c.h"
#include "control/frame.hpp"
#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/report.hpp"
#include "storage/fences.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio::buffers {

namespace fences = storage::fences;
using storage::real;

namespace {

namespace wire = harmonia::control;

/// A write's piece per request: the node takes frames of at most 16 MiB + 4 KiB.
constexpr std::uint64_t kMaxPiece = 8ULL << 20;
/// A node that failed is not tried again for this long (the write goes through meanwhile).
constexpr double kRetryDead = 5.0;
/// A node that does not accept a connection, take a request's bytes or answer it within this
/// many seconds is treated as down, whether it died, hangs (SIGSTOP) or accepts and never
/// replies: the writes go through to the PFS (fenced), reads and closes wait for it as for a
/// dead node (HARMONIA_NODE_WAIT). A drain, which takes as long as its bytes, is bounded by
/// HARMONIA_NODE_WAIT instead.
constexpr double kNodeTimeout = 5.0;
/// Replies larger than this are garbage (a read's reply carries at most one piece).
constexpr std::size_t kMaxReply = kMaxPiece + (64 << 10);

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class TcpChannel final : public Channel {
 public:
  explicit TcpChannel(int fd) : fd_(fd) {
    // A send blocked this long (the node stopped reading) fails.
    const timeval timeout{static_cast<time_t>(kNodeTimeout), 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  ~TcpChannel() override { close_kept(fd_); }

  bool send(const std::string& frame, const char* payload, std::size_t length) override {
    iovec parts[2] = {{const_cast<char*>(frame.data()), frame.size()},
                      {const_cast<char*>(payload), length}};
    return common::send_all(fd_, parts, 2);
  }

  bool receive(std::string& body) override {
    // Each wait for the node's bytes is bounded when a limit is set.
    const auto ready = [this] {
      if (wait_limit_ <= 0) return true;
      pollfd readable{fd_, POLLIN, 0};
      int n;
      while ((n = poll(&readable, 1, static_cast<int>(wait_limit_ * 1000))) < 0 && errno == EINTR) {
      }
      return n > 0;
    };
    std::uint8_t header[wire::kHeaderBytes];
    if (!common::receive_all(fd_, reinterpret_cast<char*>(header), sizeof(header), ready))
      return false;
    const std::size_t length = wire::frame_length(header);
    if (length > kMaxReply) return false;
    body.resize(length);
    return common::receive_all(fd_, body.data(), length, ready);
  }

  void limit_wait(double seconds) override { wait_limit_ = seconds; }

  bool closed_by_node() override {
    pollfd ready{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&ready, 1, 0) <= 0) return false;  // nothing to read, nothing closed
    char byte;
    // End of stream with nothing unread: the node closed it. Bytes waiting are a reply or an
    // error the next receive will read.
    return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0 ||
           (ready.revents & (POLLHUP | POLLERR)) != 0;
  }

 private:
  int fd_;
  double wait_limit_ = kNodeTimeout;
};

struct Node {
  std::mutex mutex;  ///< held while requests are in flight on the channel
  std::unique_ptr<Channel> channel;
  double dead_until = 0;
  std::uint64_t generation = 0;  ///< grows when the channel is lost
  std::uint64_t seq = 0;         ///< the last request's sequence number
};

/// Which request a reply must answer: its channel's generation and its sequence number.
struct Ticket {
  std::uint64_t generation = 0, seq = 0;
};

std::mutex pool_mutex;
std::map<std::string, std::unique_ptr<Node>>& pool() {
  static auto* nodes = new std::map<std::string, std::unique_ptr<Node>>;  // used until exit
  return *nodes;
}

Node& node_for(const std::string& address) {
  std::lock_guard lock(pool_mutex);
  auto& slot = pool()[address];
  if (!slot) slot = std::make_unique<Node>();
  return *slot;
}

enum class Outcome { Ok, Full, Failed };

/// The node is gone: no channel, and no new one for a while (its writes go through meanwhile).
void lose(Node& node, const std::string& address, const char* what) {
  node.channel.reset();
  ++node.generation;  // requests sent on the old channel get no reply from a new one
  node.dead_until = now() + kRetryDead;
  report("buffer node " + address + ": " + what + "; writing through to the PFS");
}

/// Sends `request`, and `length` bytes of `payload` raw after it (Write.payload), on `address`
/// (the node's mutex held by the caller); false when the node is unreachable or gone. `ticket`
/// receives what the reply must match. `retry_now`: try a node lost lately at once (a caller
/// waiting for it to come back), not after kRetryDead.
bool send_request(Node& node, const std::string& address, Harmonia__Bb__Request& request,
                  Ticket& ticket, const char* payload = nullptr, std::size_t length = 0,
                  bool retry_now = false) {
  if (node.channel && node.channel->closed_by_node()) {
    node.channel.reset();  // closed for idleness: open another, the node is not lost
    ++node.generation;
  }
  if (!node.channel) {
    if (now() < node.dead_until && !retry_now) return false;
    node.channel = connect_tcp(address);
    if (!node.channel) {
      lose(node, address, "unreachable");
      return false;
    }
  }
  request.seq = ++node.seq;
  ticket = {node.generation, request.seq};
  const std::string frame = common::packed_frame(request, harmonia__bb__request__get_packed_size,
                                                 harmonia__bb__request__pack);
  if (node.channel->send(frame, payload, length)) return true;
  lose(node, address, "lost");
  return false;
}

/// The response to the request of `ticket` on `address`, the oldest not answered yet; `data`,
/// when given, receives the bytes of a read. A refusal (the node may not open the file as this
/// user, say after a chmod by name) counts as `refused`: for a write, Full (it goes through, to
/// the file the program's descriptor may still write, and nothing is said); else Failed, said.
Outcome receive_reply(Node& node, const std::string& address, const Ticket& ticket,
                      std::string* data = nullptr, Outcome refused = Outcome::Failed) {
  std::string body;
  if (!node.channel || node.generation != ticket.generation) return Outcome::Failed;
  if (!node.channel->receive(body)) {
    lose(node, address, "lost");
    return Outcome::Failed;
  }
  Harmonia__Bb__Response* response = harmonia__bb__response__unpack(
      nullptr, body.size(), reinterpret_cast<const std::uint8_t*>(body.data()));
  if (!response || response->seq != ticket.seq) {
    if (response) harmonia__bb__response__free_unpacked(response, nullptr);
    lose(node, address, "sent a malformed or out-of-step response");
    return Outcome::Failed;
  }
  const auto code = response->code;
  if (data) data->assign(reinterpret_cast<const char*>(response->data.data), response->data.len);
  if (code == HARMONIA__BB__RESPONSE__CODE__NOT_HELD) {  // not an error: the PFS has the bytes
    harmonia__bb__response__free_unpacked(response, nullptr);
    return Outcome::Failed;
  }
  if (code == HARMONIA__BB__RESPONSE__CODE__FORBIDDEN && refused == Outcome::Full) {
    harmonia__bb__response__free_unpacked(response, nullptr);
    return Outcome::Full;
  }
  if (code != HARMONIA__BB__RESPONSE__CODE__OK && code != HARMONIA__BB__RESPONSE__CODE__FULL)
    report("buffer node " + address + ": " + (response->message ? response->message : "error"));
  harmonia__bb__response__free_unpacked(response, nullptr);
  if (code == HARMONIA__BB__RESPONSE__CODE__OK) return Outcome::Ok;
  return code == HARMONIA__BB__RESPONSE__CODE__FULL ? Outcome::Full : Outcome::Failed;
}

/// HARMONIA_BUFFER_ROOT, resolved; "" when unset or missing.
const std::string& buffer_root() { return environment().buffer_root; }

// What this process left on which node, per file (by inode: the data follows the file through
// renames): `sent`, the nodes that acknowledged writes of the file and have not drained it since;
// `lost`, the nodes that may hold this process's writes of the file (acknowledged, or sent and
// never answered) and whose connection failed since. A lost node's data of the file may be older
// than what this process writes elsewhere now: such writes are fenced.
std::mutex ledger_mutex;
using Ledger = std::map<std::uint64_t, std::set<std::string>>;
Ledger& sent() {
  static auto* ledger = new Ledger;  // used until exit
  return *ledger;
}
Ledger& lost() {
  static auto* ledger = new Ledger;  // used until exit
  return *ledger;
}

/// `requested`: the request reached the node's socket (it may have been carried out).
void note_outcome(std::uint64_t file, const std::string& address, Outcome outcome, bool requested) {
  std::lock_guard lock(ledger_mutex);
  if (outcome == Outcome::Ok) {
    sent()[file].insert(address);
  } else if (outcome == Outcome::Failed) {
    const auto found = sent().find(file);
    if (requested || (found != sent().end() && found->second.count(address)))
      lost()[file].insert(address);
  }
}

void note_drained(std::uint64_t file, const std::string& address) {
  std::lock_guard lock(ledger_mutex);
  for (Ledger* ledger : {&sent(), &lost()}) {
    const auto found = ledger->find(file);
    if (found == ledger->end()) continue;
    found->second.erase(address);
    if (found->second.empty()) ledger->erase(found);
  }
}

bool is_lost(std::uint64_t file, const std::string& address) {
  std::lock_guard lock(ledger_mutex);
  const auto found = lost().find(file);
  return found != lost().end() && found->second.count(address) > 0;
}

/// Sends one request to `address` and waits for its reply (the node's channel to itself);
/// `requested` says whether the request reached the node's socket.
Outcome ask(const std::string& address, Harmonia__Bb__Request& request, bool& requested,
            bool retry_now = false, double wait = kNodeTimeout) {
  Node& node = node_for(address);
  std::lock_guard lock(node.mutex);
  Ticket ticket;
  requested = send_request(node, address, request, ticket, nullptr, 0, retry_now);
  if (!requested) return Outcome::Failed;
  if (wait != kNodeTimeout) node.channel->limit_wait(wait);
  const Outcome outcome = receive_reply(node, address, ticket);
  if (node.channel) node.channel->limit_wait(kNodeTimeout);
  return outcome;
}

Outcome drain_one(const FileKey& file, const std::string& address, bool retry_now = false) {
  // A drain's reply comes when its bytes are in the PFS file: as long as they take, within the
  // wait a read or close gives a node that is down.
  const double wait = std::max(kNodeTimeout, environment().config.node_wait);
  Harmonia__Bb__Drain drain = HARMONIA__BB__DRAIN__INIT;
  drain.file = const_cast<char*>(file.name.c_str());
  drain.inode = file.inode;
  Harmonia__Bb__Request request = HARMONIA__BB__REQUEST__INIT;
  request.body_case = HARMONIA__BB__REQUEST__BODY_DRAIN;
  request.drain = &drain;
  bool requested = false;
  const Outcome outcome = ask(address, request, requested, retry_now, wait);
  // A drained file's fence is gone too (the node consumed it): nothing of it is older any more.
  if (outcome == Outcome::Ok)
    note_drained(file.inode, address);
  else
    note_outcome(file.inode, address, outcome, requested);
  return outcome;
}

/// A write's or read's piece: cut at stripe boundaries and at the largest request.
struct Piece {
  std::uint64_t at;
  std::size_t from, length;  ///< where in the caller's bytes
  const std::string* address;
  Outcome outcome = Outcome::Failed;
  bool sent = false;  ///< the request reached the node's socket
  Ticket ticket;
};

std::vector<Piece> cut(off64_t offset, std::size_t total, const std::vector<std::string>& nodes,
                       std::uint64_t stripe) {
  std::vector<Piece> pieces;
  for (std::size_t done = 0; done < total;) {
    const auto at = static_cast<std::uint64_t>(offset) + done;
    const std::uint64_t unit = at / stripe;
    const std::size_t length =
        std::min<std::uint64_t>({total - done, (unit + 1) * stripe - at, kMaxPiece});
    pieces.push_back({at, done, length, &nodes[unit % nodes.size()], Outcome::Failed, false, {}});
    done += length;
  }
  return pieces;
}

/// Sends one request per piece with `send(piece)` (true when it reached the node's socket);
/// after a node failed, its later pieces are not sent.
template <class Send>
void send_pieces(std::vector<Piece>& pieces, Send send) {
  std::set<std::string> broken;
  for (auto& p : pieces) {
    if (broken.count(*p.address)) continue;
    p.sent = send(p);
    if (!p.sent) broken.insert(*p.address);
  }
}

/// The mutexes of every node the pieces go to, taken in address order (no lock-order cycles):
/// requests can then be pipelined on each channel.
std::vector<std::unique_lock<std::mutex>> lock_nodes(const std::vector<Piece>& pieces) {
  std::set<std::string> involved;
  for (const auto& p : pieces) involved.insert(*p.address);
  std::vector<std::unique_lock<std::mutex>> locks;
  for (const auto& address : involved) locks.emplace_back(node_for(address).mutex);
  return locks;
}

/// Whether the node at `address` drains to HARMONIA_BUFFER_ROOT: every node makes
/// ROOT/.harmonia/fences/ADDRESS when it starts, so a root that lacks it is another directory
/// (a misconfiguration that would leave the application's files empty). Asked once per node.
bool drains_here(const std::string& address) {
  static std::mutex mutex;
  static auto* known = new std::map<std::string, bool>;  // used until exit
  std::lock_guard lock(mutex);
  if (const auto found = known->find(address); found != known->end()) return found->second;
  const std::string mark = buffer_root() + "/" + fences::kReservedDir + "/fences/" + address;
  struct stat64 st {};
  const bool here = real().fstatat64(AT_FDCWD, mark.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode);
  if (!here)
    report("HARMONIA_BUFFER_ROOT=" + buffer_root() + " is not where buffer node " + address +
           " drains (" + mark + " is missing): writes go through to the PFS instead");
  (*known)[address] = here;
  return here;
}

}  // namespace

void fence(const FileKey& file, off64_t offset, std::size_t length) {
  std::vector<std::string> nodes;
  {
    std::lock_guard lock(ledger_mutex);
    const auto found = lost().find(file.inode);
    if (file.name.empty() || length == 0 || found == lost().end()) return;
    nodes.assign(found->second.begin(), found->second.end());
  }
  // Kept by file, as the nodes hold its data: a rename changes nothing.
  const std::string fence_name = std::to_string(file.inode);
  // Fences are opened beneath the root, with no link followed (common/beneath.hpp).
  const int root = real().open(buffer_root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (const auto& node : nodes) {
    // Held only while appending: the node holds it for a whole drain, so the write that follows
    // lands after that drain, or the drain skips it.
    const int fd = root < 0 ? -1 : fences::lock(root, node);
    if (fd < 0 ||
        !fences::append(root, node, fence_name, {static_cast<std::uint64_t>(offset), length}))
      // The write goes on: losing the order of one range beats failing the application.
      report("buffer node " + node + ": cannot fence " + file.name + " (" + std::strerror(errno) +
             "); if the node comes back, its drain may overwrite newer bytes");
    fences::unlock(fd);
  }
  if (root >= 0) real().close(root);
}

std::unique_ptr<Channel> connect_tcp(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return nullptr;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints,
                  &found) != 0)
    return nullptr;
  // Connected within kNodeTimeout, or not at all: a host that drops the packets must not hold
  // the write for the kernel's minutes of retries.
  const int fd =
      above_program(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  bool ok =
      fd >= 0 && (connect(fd, found->ai_addr, found->ai_addrlen) == 0 || errno == EINPROGRESS);
  freeaddrinfo(found);
  if (ok) {
    pollfd writable{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    ok = poll(&writable, 1, static_cast<int>(kNodeTimeout * 1000)) == 1 &&
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0 &&
         fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0;
  }
  if (!ok) {
    if (fd >= 0) close_kept(fd);
    return nullptr;
  }
  const int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  auto channel = std::make_unique<TcpChannel>(fd);
  // The node knows whose data it holds only from a MUNGE credential, sent first. Without munged
  // none is sent: a node that requires one refuses the writes, and they go through.
  std::string why;
  const auto credential =
      common::make_credential("harmonia-bbd", common::munge_socket_from_environment(), why);
  if (!credential) return channel;
  Harmonia__Bb__Authenticate body = HARMONIA__BB__AUTHENTICATE__INIT;
  body.credential.data = reinterpret_cast<uint8_t*>(const_cast<char*>(credential->data()));
  body.credential.len = credential->size();
  Harmonia__Bb__Request request = HARMONIA__BB__REQUEST__INIT;
  request.body_case = HARMONIA__BB__REQUEST__BODY_AUTHENTICATE;
  request.authenticate = &body;
  std::string reply;
  if (!channel->send(common::packed_frame(request, harmonia__bb__request__get_packed_size,
                                          harmonia__bb__request__pack),
                     nullptr, 0) ||
      !channel->receive(reply))
    return nullptr;
  Harmonia__Bb__Response* response = harmonia__bb__response__unpack(
      nullptr, reply.size(), reinterpret_cast<const uint8_t*>(reply.data()));
  const bool accepted = response && response->code == HARMONIA__BB__RESPONSE__CODE__OK;
  if (!accepted)
    report("buffer node " + address + ": our MUNGE credential was refused: " +
           (response && response->message ? response->message : "no valid reply"));
  if (response) harmonia__bb__response__free_unpacked(response, nullptr);
  return accepted ? std::move(channel) : nullptr;
}

std::string relative_name(const std::string& path) { return name_beneath(buffer_root(), path); }

std::string name_beneath(const std::string& root, const std::string& path) {
  if (root.empty() || path.size() <= root.size() + 1 || path.compare(0, root.size(), root) != 0 ||
      path[root.size()] != '/')
    return "";
  std::string name = path.substr(root.size() + 1);
  // The clients' and nodes' own files (fences) are never buffered.
  return fences::reserved(name) ? "" : name;
}

bool write(const FileKey& file, const std::string& job, const struct iovec* iov, int count,
           off64_t offset, const std::vector<std::string>& nodes, std::uint64_t stripe) {
  if (nodes.empty() || stripe == 0) return false;
  for (const auto& address : nodes)
    if (!drains_here(address)) return false;
  // The data as one run: pieces cut at stripe boundaries point into it.
  std::string gathered;
  const char* data = static_cast<const char*>(iov[0].iov_base);
  std::size_t total = iov[0].iov_len;
  if (count > 1) {
    for (int i = 0; i < count; ++i)
      gathered.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    data = gathered.data();
    total = gathered.size();
  }
  // Lost nodes of this grant drain the file first (consuming its fence); if they cannot, the
  // write goes around them, through to the PFS.
  std::vector<std::string> lost_here;
  for (const auto& address : nodes)
    if (is_lost(file.inode, address)) lost_here.push_back(address);
  if (!lost_here.empty() && !drain(file, lost_here, 0, "node-lost").empty()) return false;
  fence(file, offset, total);
  std::vector<Piece> pieces = cut(offset, total, nodes, stripe);
  {
    // All pieces are sent before the first reply is read: each node stores one while the next
    // arrives.
    const auto locks = lock_nodes(pieces);
    send_pieces(pieces, [&](Piece& p) {
      Harmonia__Bb__Write body = HARMONIA__BB__WRITE__INIT;
      body.file = const_cast<char*>(file.name.c_str());
      body.inode = file.inode;
      body.handle.data = reinterpret_cast<std::uint8_t*>(const_cast<char*>(file.handle.data()));
      body.handle.len = file.handle.size();
      body.offset = p.at;
      body.payload = p.length;
      body.job = const_cast<char*>(job.c_str());
      Harmonia__Bb__Request request = HARMONIA__BB__REQUEST__INIT;
      request.body_case = HARMONIA__BB__REQUEST__BODY_WRITE;
      request.write = &body;
      return send_request(node_for(*p.address), *p.address, request, p.ticket, data + p.from,
                          p.length);
    });
    for (auto& p : pieces)
      if (p.sent)
        p.outcome =
            receive_reply(node_for(*p.address), *p.address, p.ticket, nullptr, Outcome::Full);
  }
  bool ok = true;
  std::set<std::string> full;
  for (const auto& p : pieces) {
    note_outcome(file.inode, *p.address, p.outcome, p.sent);
    if (p.outcome == Outcome::Full) full.insert(*p.address);
    ok = ok && p.outcome == Outcome::Ok;
  }
  // What a full node holds of the file must land before the write that goes through.
  if (!full.empty()) (void)drain(file, {full.begin(), full.end()}, 0, "node-full");
  return ok;
}

bool wrote(std::uint64_t inode) {
  std::lock_guard lock(ledger_mutex);
  return sent().count(inode) > 0 || lost().count(inode) > 0;
}

bool read(const FileKey& file, off64_t offset, std::size_t length,
          const std::vector<std::string>& nodes, std::uint64_t stripe, std::string& out,
          const FileIdentity* identity) {
  if (nodes.empty() || stripe == 0 || length == 0) return false;
  // A staged-in copy is of the file beneath HARMONIA_BUFFER_ROOT only if the node drains there.
  if (identity)
    for (const auto& address : nodes)
      if (!drains_here(address)) return false;
  // A lost node may hold older bytes than the PFS: only the PFS answers for it.
  for (const auto& address : nodes)
    if (is_lost(file.inode, address)) return false;
  std::vector<Piece> pieces = cut(offset, length, nodes, stripe);
  out.resize(length);
  const auto locks = lock_nodes(pieces);
  send_pieces(pieces, [&](Piece& p) {
    Harmonia__Bb__Read body = HARMONIA__BB__READ__INIT;
    body.file = const_cast<char*>(file.name.c_str());
    body.inode = file.inode;
    body.offset = p.at;
    body.length = p.length;
    Harmonia__Bb__FileIdentity seen = HARMONIA__BB__FILE_IDENTITY__INIT;
    if (identity) {
      seen.size = identity->size;
      seen.mtime_ns = identity->mtime_ns;
      seen.ctime_ns = identity->ctime_ns;
      seen.inode = identity->inode;
      body.identity = &seen;
    }
    Harmonia__Bb__Request request = HARMONIA__BB__REQUEST__INIT;
    request.body_case = HARMONIA__BB__REQUEST__BODY_READ;
    request.read = &body;
    return send_request(node_for(*p.address), *p.address, request, p.ticket);
  });
  bool ok = true;
  std::string data;
  for (const auto& p : pieces) {
    Node& node = node_for(*p.address);
    // Every reply is read, even after a miss: the channel must stay in step.
    const Outcome outcome =
        p.sent ? receive_reply(node, *p.address, p.ticket, &data) : Outcome::Failed;
    if (outcome != Outcome::Ok || data.size() != p.length) {
      ok = false;
      continue;
    }
    out.replace(p.from, data.size(), data);
  }
  return ok;
}

std::vector<std::string> drain(const FileKey& file, std::vector<std::string> nodes, double wait,
                               const char* reason) {
  for (auto& node : lost_nodes(file.inode))
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  if (nodes.empty()) return {};
  if (const auto drained =
          agent::drain_through_scheduler(file.name, file.inode, nodes, wait, reason)) {
    if (!*drained) {
      // Which one stayed down the scheduler does not say: each may still hold older bytes of
      // the file, so writes elsewhere are fenced against all of them (a fence of a node that did
      // drain is consumed by its next drain, before this process writes there again).
      for (const auto& address : nodes) note_outcome(file.inode, address, Outcome::Failed, true);
      return nodes;
    }
    for (const auto& address : nodes) note_drained(file.inode, address);
    return {};
  }
  // No scheduler daemon: the nodes themselves.
  const double deadline = now() + wait;
  for (bool again = false;; again = true) {
    for (auto& node : lost_nodes(file.inode))
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    std::vector<std::string> failed;
    for (const auto& address : nodes)
      if (drain_one(file, address, again) != Outcome::Ok) failed.push_back(address);
    const double left = deadline - now();
    if (failed.empty() || left <= 0) return failed;
    nodes = std::move(failed);
    const timespec pause{0, static_cast<long>(std::min(left, 0.2) * 1e9)};
    nanosleep(&pause, nullptr);
  }
}

std::vector<std::string> lost_nodes(std::uint64_t inode) {
  std::lock_guard lock(ledger_mutex);
  const auto found = lost().find(inode);
  if (found == lost().end()) return {};
  return {found->second.begin(), found->second.end()};
}

bool publish(const FileKey& file) {
  std::vector<std::string> holding;
  {
    std::lock_guard lock(ledger_mutex);
    const auto found = sent().find(file.inode);
    if (found == sent().end()) return true;
    holding.assign(found->second.begin(), found->second.end());
  }
  bool published = true;
  for (const auto& address : holding) {
    Harmonia__Bb__Publish body = HARMONIA__BB__PUBLISH__INIT;
    Harmonia__Bb__Request request = HARMONIA__BB__REQUEST__INIT;
    request.body_case = HARMONIA__BB__REQUEST__BODY_PUBLISH;
    request.publish = &body;
    bool requested = false;
    if (ask(address, request, requested) == Outcome::Ok) continue;
    published = false;
    if (!requested || !node_for(address).channel)  // gone, not merely without a scheduler
      note_outcome(file.inode, address, Outcome::Failed, requested);
  }
  return published;
}

std::string handle_of(int fd) { return handle_at(fd, ""); }

bool user_may_open_for_writing(int fd) {
  const int errno_before = errno;
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const bool may = faccessat(AT_FDCWD, link.c_str(), W_OK, AT_EACCESS) == 0;
  errno = errno_before;
  return may;
}

std::string handle_at(int dirfd, const char* path) {
  std::string bytes(sizeof(file_handle) + MAX_HANDLE_SZ, '\0');
  auto* handle = reinterpret_cast<file_handle*>(bytes.data());
  handle->handle_bytes = MAX_HANDLE_SZ;
  int mount = 0;
  const int errno_before = errno;
  const int flags = path[0] ? AT_SYMLINK_FOLLOW : AT_EMPTY_PATH;
  const int result = name_to_handle_at(dirfd, path, handle, &mount, flags);
  errno = errno_before;
  if (result != 0) return "";
  bytes.resize(sizeof(file_handle) + handle->handle_bytes);
  return bytes;
}

bool drained_or_unavailable(const std::string& shown, const FileKey& file,
                            std::vector<std::string> nodes, double wait, const char* reason) {
  const auto failed = drain(file, std::move(nodes), wait, reason);
  if (failed.empty()) return true;
  report(shown + ": buffer node " + failed.front() + " holds bytes of it and is down (waited " +
         std::to_string(static_cast<int>(wait)) + " s, HARMONIA_NODE_WAIT): EIO");
  errno = EIO;
  return false;
}

bool holds_any() {
  std::lock_guard lock(ledger_mutex);
  return !sent().empty() || !lost().empty();
}

bool beneath_buffer_root(int dirfd, const char* path, dev_t device) {
  const std::string& root = buffer_root();
  if (root.empty() || !path) return false;
  static const dev_t root_device = [&root] {
    struct stat64 st {};
    return real().fstatat64(AT_FDCWD, root.c_str(), &st, 0) == 0 ? st.st_dev : dev_t{0};
  }();
  if (device != root_device) return false;
  std::string absolute;
  if (path[0] == '/') {
    absolute = path;
  } else {
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
      if (!getcwd(base, sizeof(base))) return false;
      absolute = base;
    } else {
      const std::string link = "/proc/self/fd/" + std::to_string(dirfd);
      const ssize_t n = readlink(link.c_str(), base, sizeof(base) - 1);
      if (n <= 0) return false;
      absolute.assign(base, static_cast<std::size_t>(n));
    }
    absolute += "/";
    absolute += path;
  }
  return absolute.size() > root.size() && absolute.compare(0, root.size(), root) == 0 &&
         absolute[root.size()] == '/';
}

bool settle_file(const std::string& path, std::uint64_t inode, double wait) {
  std::vector<std::string> nodes;
  {
    std::lock_guard lock(ledger_mutex);
    const auto found = sent().find(inode);
    if (found == sent().end() && !lost().count(inode)) return true;
    if (found != sent().end()) nodes.assign(found->second.begin(), found->second.end());
  }
  return drained_or_unavailable(path, {relative_name(path), inode, {}}, std::move(nodes), wait,
                                "reopen");
}

}  // namespace harmonia::bbio::buffers
