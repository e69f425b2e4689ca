#include "common/identity.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace harmonia::common {

namespace {

/// A munge context on `socket` ("" munged's default); nullptr when none can be made.
munge_ctx_t context_for(const std::string& socket) {
  munge_ctx_t context = munge_ctx_create();
  if (context && !socket.empty() &&
      munge_ctx_set(context, MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    munge_ctx_destroy(context);
    return nullptr;
  }
  return context;
}

}  // namespace

namespace {

/// A TCP endpoint as the kernel's socket tables key it: the family (a v4-mapped IPv6 address is
/// the IPv4 one), the address in network order and the port in network order.
struct Endpoint {
  int family = AF_INET;
  std::uint32_t address[4] = {0, 0, 0, 0};
  std::uint16_t port = 0;
};

Endpoint endpoint_of(const sockaddr_storage& address) {
  Endpoint out;
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    out.address[0] = in.sin_addr.s_addr;
    out.port = in.sin_port;
    return out;
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
  out.port = in6.sin6_port;
  if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
    std::memcpy(&out.address[0], &in6.sin6_addr.s6_addr[12], 4);
    return out;
  }
  out.family = AF_INET6;
  std::memcpy(out.address, &in6.sin6_addr, sizeof(out.address));
  return out;
}

/// How long the kernel may take to answer a socket lookup (it answers at once; this bounds a
/// connection's set-up whatever happens).
constexpr timeval kLookupTimeout{0, 200'000};

/// The user whose socket on this host is connected from `peer` to `local`, as identd finds it:
/// one exact lookup of that connection in the kernel's TCP table (NETLINK_SOCK_DIAG, the 4-tuple
/// of the peer's socket), whatever the number of sockets on the host. Only an established socket
/// that a process still holds names a user (a closed one, in TIME_WAIT or orphaned, does not).
std::optional<uid_t> socket_owner(const sockaddr_storage& peer, const sockaddr_storage& local) {
  const Endpoint from = endpoint_of(peer), to = endpoint_of(local);
  if (from.family != to.family) return {};
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return {};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &kLookupTimeout, sizeof(kLookupTimeout));
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof(request);
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;  // one socket, not a dump of the table
  request.body.sdiag_family = static_cast<std::uint8_t>(from.family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0U;
  // The peer's socket: its own side is `peer`, its other side this daemon's `local`.
  request.body.id.idiag_sport = from.port;
  request.body.id.idiag_dport = to.port;
  std::memcpy(request.body.id.idiag_src, from.address, sizeof(from.address));
  std::memcpy(request.body.id.idiag_dst, to.address, sizeof(to.address));
  request.body.id.idiag_cookie[0] = request.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<uid_t> owner;
  alignas(nlmsghdr) char reply[8192];
  if (sendto(fd, &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) == static_cast<ssize_t>(sizeof(request))) {
    const ssize_t length = recv(fd, reply, sizeof(reply), 0);
    const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
    if (length > 0 && NLMSG_OK(header, static_cast<unsigned>(length)) &&
        header->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        header->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
      if (found->idiag_state == TCP_ESTABLISHED && found->idiag_inode != 0 &&
          found->id.idiag_sport == from.port && found->id.idiag_dport == to.port)
        owner = static_cast<uid_t>(found->idiag_uid);
    }
  }
  close(fd);
  return owner;
}

}  // namespace

std::string peer_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[NI_MAXHOST] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), nullptr, 0,
                NI_NUMERICHOST);
  return host;
}

std::string peer_key(int fd, std::optional<uid_t> uid) {
  if (uid) return "uid " + std::to_string(*uid);
  return "address " + peer_address(fd);
}

bool loopback(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr) >> 24) == 127;
  if (address.ss_family != AF_INET6) return false;
  const in6_addr& in6 = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&in6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127;
}

std::optional<Identity> peer_identity(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof(local), peer_length = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return {};
  if (local.ss_family == AF_UNIX) {
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return {};
    return Identity{credentials.uid, credentials.gid};
  }
  if ((local.ss_family != AF_INET && local.ss_family != AF_INET6) ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 || !loopback(peer))
    return {};
  const auto uid = socket_owner(peer, local);
  if (!uid) return {};
  // The primary group of that user, as SO_PEERCRED would give it.
  passwd entry{};
  passwd* user = nullptr;
  std::vector<char> text(16384);
  const gid_t gid =
      getpwuid_r(*uid, &entry, text.data(), text.size(), &user) == 0 && user ? user->pw_gid : *uid;
  return Identity{*uid, gid};
}

std::string munge_socket_from_environment() {
  const char* socket = std::getenv("HARMONIA_MUNGE_SOCKET");
  return socket ? socket : "";
}

std::optional<std::string> make_credential(const std::string& service, const std::string& socket,
                                           std::string& why) {
  munge_ctx_t context = context_for(socket);
  if (!context) {
    why = "munge: cannot use the socket " + socket;
    return {};
  }
  char* credential = nullptr;
  const munge_err_t error =
      munge_encode(&credential, context, service.data(), static_cast<int>(service.size()));
  if (error != EMUNGE_SUCCESS) {
    why = std::string("munge: ") + munge_ctx_strerror(context);
    munge_ctx_destroy(context);
    return {};
  }
  munge_ctx_destroy(context);
  std::string out(credential);
  std::free(credential);
  return out;
}

CredentialChecker::CredentialChecker(std::string service, std::string socket, double window_seconds)
    : service_(std::move(service)), socket_(std::move(socket)), window_(window_seconds) {}

namespace {

/// What munged made of a credential.
struct Decoded {
  munge_err_t error = EMUNGE_SNAFU;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string payload;
  time_t encoded_at = 0;
  std::string message;      ///< munged's words for an error
  bool no_context = false;  ///< libmunge could not be set up for the socket

  /// A credential munged made with this key, whoever it names (replayed and expired ones too:
  /// munged still says whose they are).
  bool genuine() const {
    return error == EMUNGE_SUCCESS || error == EMUNGE_CRED_EXPIRED ||
           error == EMUNGE_CRED_REWOUND || error == EMUNGE_CRED_REPLAYED;
  }
};

Decoded decode(const std::string& credential, const std::string& socket) {
  Decoded out;
  munge_ctx_t context = context_for(socket);
  if (!context) {
    out.no_context = true;
    return out;
  }
  void* payload = nullptr;
  int payload_length = 0;
  out.error =
      munge_decode(credential.c_str(), context, &payload, &payload_length, &out.uid, &out.gid);
  munge_ctx_get(context, MUNGE_OPT_ENCODE_TIME, &out.encoded_at);  // munge_ctx_get writes a time_t
  const char* detail = munge_ctx_strerror(context);
  out.message = detail && *detail ? detail : munge_strerror(out.error);
  munge_ctx_destroy(context);
  if (payload)
    out.payload.assign(static_cast<const char*>(payload), static_cast<std::size_t>(payload_length));
  std::free(payload);
  return out;
}

}  // namespace

std::optional<Identity> CredentialChecker::check(const std::string& credential, std::string& why) {
  if (credential.empty() || credential.size() > 4096) {
    why = "no MUNGE credential (or one of more than 4096 bytes)";
    return {};
  }
  const Decoded decoded = decode(credential, socket_);
  if (decoded.no_context) {
    why = "munge: cannot use the socket " + socket_;
    return {};
  }
  if (decoded.error != EMUNGE_SUCCESS) {
    why = "MUNGE credential refused: " + decoded.message;
    return {};
  }
  if (decoded.payload != service_) {
    why = "MUNGE credential made for \"" + decoded.payload.substr(0, 64) + "\", not " + service_;
    return {};
  }
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const double age = static_cast<double>(now - decoded.encoded_at);
  if (std::fabs(age) > window_) {
    why = "MUNGE credential made " + std::to_string(static_cast<long long>(age)) +
          " s ago: outside the " + std::to_string(static_cast<long long>(window_)) + " s window";
    return {};
  }
  std::lock_guard lock(mutex_);
  for (auto it = seen_.begin(); it != seen_.end();)
    it = it->second < now ? seen_.erase(it) : std::next(it);
  if (!seen_.emplace(credential, now + static_cast<std::int64_t>(std::ceil(window_)) + 1).second) {
    why = "MUNGE credential replayed: it was accepted before";
    return {};
  }
  return Identity{decoded.uid, decoded.gid};
}

bool CredentialChecker::confirms(uid_t known, const std::string& credential,
                                 std::string& why) const {
  if (credential.empty() || credential.size() > 4096) return true;
  const Decoded decoded = decode(credential, socket_);
  if (!decoded.genuine() || decoded.uid == known) return true;
  why = "the MUNGE credential names uid " + std::to_string(decoded.uid) + ", but this " +
        "connection already acts for uid " + std::to_string(known) +
        " (the kernel's word for a peer on this host, or an earlier Authenticate): refused";
  return false;
}

bool Administrators::contains(uid_t uid) const {
  return uid == 0 || std::find(uids.begin(), uids.end(), uid) != uids.end();
}

ActAs::ActAs(uid_t uid, gid_t gid) {
  if (uid == geteuid()) {
    ok_ = true;
    return;
  }
  if (geteuid() != 0) {
    why_ = "this process runs as uid " + std::to_string(geteuid()) +
           ", not root: it cannot act for uid " + std::to_string(uid);
    return;
  }
  std::vector<gid_t> groups;
  passwd entry{};
  passwd* user = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &user) == 0 && user) {
    gid = user->pw_gid;
    int count = 64;
    groups.resize(static_cast<std::size_t>(count));
    while (getgrouplist(user->pw_name, user->pw_gid, groups.data(), &count) < 0)
      groups.resize(static_cast<std::size_t>(count));
    groups.resize(static_cast<std::size_t>(count));
  } else {
    groups.push_back(gid);
  }
  saved_.resize(static_cast<std::size_t>(std::max(getgroups(0, nullptr), 0)));
  if (getgroups(static_cast<int>(saved_.size()), saved_.data()) < 0 ||
      syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    why_ = std::string("setgroups: ") + std::strerror(errno);
    return;
  }
  changed_ = true;
  setfsgid(gid);
  setfsuid(uid);
  // Both calls return the previous value; asking with -1 (never valid) tells the current one.
  if (static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) != gid ||
      static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) != uid) {
    why_ = "setfsuid/setfsgid to uid " + std::to_string(uid) + " failed";
    return;
  }
  ok_ = true;
}

ActAs::~ActAs() {
  if (!changed_) return;
  setfsuid(geteuid());
  setfsgid(getegid());
  (void)syscall(SYS_setgroups, saved_.size(), saved_.data());
}

}  // namespace harmonia::common
