#include "common/identity.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
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

/// An address as /proc/net/tcp and tcp6 print it ("0100007F:1F90"): each 32-bit word of the
/// address as the kernel holds it, in hexadecimal, then the port.
std::string proc_address(const sockaddr_storage& address) {
  char text[64];
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    std::snprintf(text, sizeof(text), "%08X:%04X", in.sin_addr.s_addr, ntohs(in.sin_port));
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    std::uint32_t words[4];
    std::memcpy(words, &in6.sin6_addr, sizeof(words));
    std::snprintf(text, sizeof(text), "%08X%08X%08X%08X:%04X", words[0], words[1], words[2],
                  words[3], ntohs(in6.sin6_port));
  }
  return text;
}

/// The user whose socket on this host is connected from `peer` to `local`: the owner of the
/// kernel's entry for it in /proc/net/tcp (or tcp6), as identd finds it.
std::optional<uid_t> socket_owner(const sockaddr_storage& peer, const sockaddr_storage& local) {
  const std::string want_local = proc_address(peer), want_remote = proc_address(local);
  FILE* table = std::fopen(peer.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
  if (!table) return {};
  std::optional<uid_t> owner;
  char line[512];
  while (!owner && std::fgets(line, sizeof(line), table)) {
    char from[64], to[64];
    unsigned state = 0, uid = 0;
    if (std::sscanf(line, " %*u: %63s %63s %x %*s %*s %*s %u", from, to, &state, &uid) == 4 &&
        state == 1 /* ESTABLISHED */ && want_local == from && want_remote == to)
      owner = static_cast<uid_t>(uid);
  }
  std::fclose(table);
  return owner;
}

}  // namespace

std::string peer_key(int fd, std::optional<uid_t> uid) {
  if (uid) return "uid " + std::to_string(*uid);
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[NI_MAXHOST] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), nullptr, 0,
                NI_NUMERICHOST);
  return std::string("address ") + host;
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

std::optional<Identity> CredentialChecker::check(const std::string& credential, std::string& why) {
  if (credential.empty() || credential.size() > 4096) {
    why = "no MUNGE credential (or one of more than 4096 bytes)";
    return {};
  }
  munge_ctx_t context = context_for(socket_);
  if (!context) {
    why = "munge: cannot use the socket " + socket_;
    return {};
  }
  void* payload = nullptr;
  int payload_length = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t error =
      munge_decode(credential.c_str(), context, &payload, &payload_length, &uid, &gid);
  time_t encoded_at = 0;  // munge_ctx_get writes a time_t
  munge_ctx_get(context, MUNGE_OPT_ENCODE_TIME, &encoded_at);
  const char* detail = munge_ctx_strerror(context);
  const std::string message = detail && *detail ? detail : munge_strerror(error);
  munge_ctx_destroy(context);
  const std::string said(payload ? static_cast<const char*>(payload) : "",
                         payload ? static_cast<std::size_t>(payload_length) : 0);
  std::free(payload);
  if (error != EMUNGE_SUCCESS) {
    why = "MUNGE credential refused: " + message;
    return {};
  }
  if (said != service_) {
    why = "MUNGE credential made for \"" + said.substr(0, 64) + "\", not " + service_;
    return {};
  }
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const double age = static_cast<double>(now - encoded_at);
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
  return Identity{uid, gid};
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
