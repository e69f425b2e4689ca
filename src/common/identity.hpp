#pragma once
/// @file Who sends a request, and acting as them on files (docs/security.md, "Identity").
///
/// On a Unix socket the kernel tells the peer's user (SO_PEERCRED). Over TCP a client proves its
/// user with a MUNGE credential (libmunge, as Slurm does): the first frame of a connection
/// carries one, the daemon decodes it with its munged once, and the user it names is bound to
/// the connection for its life. A credential is accepted once (munged's replay cache, and this
/// daemon's own: a credential seen before within the window is refused even where another
/// munged decoded it), only for the service it was made for (its payload), and only within
/// `window` seconds of its making (its encode time, checked here as well as munged's TTL).

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace harmonia::common {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
};

/// The numeric address of a socket's peer ("?" when it has none), for keys and log lines.
std::string peer_address(int fd);

/// The user at the other end of a connection, as the kernel knows it: on a Unix socket from
/// SO_PEERCRED; on a TCP connection from this host (a loopback address at both ends) the owner
/// of the peer's socket, found by one lookup of that connection in the kernel's TCP table
/// (NETLINK_SOCK_DIAG: constant time, whatever the sockets on the host), with that user's
/// primary group. Nothing for a TCP peer on another host (it must authenticate: MUNGE), for a
/// peer whose socket is no longer established and held by a process, or when the kernel does
/// not say.
std::optional<Identity> peer_identity(int fd);
/// Whom a connection counts for in the daemons' limits: "uid N" when its user is known, else
/// "address HOST" (its peer's numeric address).
std::string peer_key(int fd, std::optional<uid_t> uid);
/// Whether `address` (IPv4, IPv6, or IPv4 mapped in IPv6) is a loopback address.
bool loopback(const sockaddr_storage& address);

/// The munged socket clients and daemons use: HARMONIA_MUNGE_SOCKET, else "" (munged's own
/// default, /run/munge/munge.socket.2).
std::string munge_socket_from_environment();

/// A MUNGE credential for `service` ("harmonia-schedd", "harmonia-bbd"), made by the munged at
/// `socket` ("" its default); nothing and `why` when munged cannot make one.
std::optional<std::string> make_credential(const std::string& service, const std::string& socket,
                                           std::string& why);

/// Decodes credentials with one munged and remembers the ones it accepted. Thread-safe.
class CredentialChecker {
 public:
  /// `service`: the payload a credential must carry; `window`: seconds a credential is good for
  /// after its making (and before it, for clocks a little apart).
  CredentialChecker(std::string service, std::string socket, double window_seconds);
  /// The user the credential names, or nothing and `why` (forged, replayed, expired, made for
  /// another service, or munged unreachable).
  std::optional<Identity> check(const std::string& credential, std::string& why);
  /// Whether `credential`, sent on a connection that already acts for `known` (the kernel's word
  /// for a peer on this host, or an earlier credential), may stand beside it: false, `why`
  /// saying so, when munged says it names another user. One that names `known`, or that cannot
  /// be decoded here (no munged, another key), changes nothing: the connection keeps its user.
  bool confirms(uid_t known, const std::string& credential, std::string& why) const;
  double window() const { return window_; }

 private:
  std::string service_, socket_;
  double window_;
  std::mutex mutex_;
  /// Credentials accepted, until their window closes.
  std::unordered_map<std::string, std::int64_t> seen_;
};

/// Who may act on any job and any file: root always, and the users an administrator names.
struct Administrators {
  std::vector<uid_t> uids;
  bool contains(uid_t uid) const;
};

/// While it lives, the calling thread opens files with the file-system identity of `uid`: its
/// uid, its primary group and its supplementary groups (passwd and group databases; a uid with
/// no passwd entry: `gid` and no supplementary group). Only this thread changes (raw syscalls:
/// glibc's setgroups would change every thread of the process). Does nothing when `uid` is the
/// process's own; a process that is not root cannot act for another user. ok() false, why() saying
/// why, when the identity could not be taken: nothing may then be opened for that user.
class ActAs {
 public:
  ActAs(uid_t uid, gid_t gid);
  ~ActAs();
  ActAs(const ActAs&) = delete;
  ActAs& operator=(const ActAs&) = delete;
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

 private:
  bool ok_ = false, changed_ = false;
  std::string why_;
  std::vector<gid_t> saved_;
};

}  // namespace harmonia::common
