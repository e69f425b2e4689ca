// Who a connection's peer is, as the kernel says (src/common/identity.hpp): a loopback TCP
// peer's user from one lookup of its socket in the kernel's table, another user's socket named
// as that user's, a closed peer named as nobody's; a Unix socket's peer from SO_PEERCRED.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/identity.hpp"
#include "common/tcp.hpp"

namespace {

using harmonia::common::connect_tcp;
using harmonia::common::listen_tcp;
using harmonia::common::peer_identity;

/// A listener on HOST, port 0, and its address as "HOST:PORT".
struct Listener {
  int fd = -1;
  std::string address;
  explicit Listener(const std::string& host) {
    std::uint16_t port = 0;
    fd = listen_tcp(host + ":0", "test", 0, port);
    address = host + ":" + std::to_string(port);
  }
  ~Listener() { close(fd); }
  int accept_one() const { return accept4(fd, nullptr, nullptr, SOCK_CLOEXEC); }
};

/// Connects to `listener` from this process: the served side's peer is this process's user.
void expect_own_connection(const Listener& listener) {
  const int client = connect_tcp(listener.address, "test");
  const int served = listener.accept_one();
  ASSERT_GE(served, 0);
  const auto who = peer_identity(served);
  close(client);
  close(served);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->uid, geteuid());
}

TEST(Identity, ALoopbackPeerIsItsSocketsOwner) { expect_own_connection(Listener("127.0.0.1")); }

TEST(Identity, AnIpv6LoopbackPeerIsItsSocketsOwner) {
  std::unique_ptr<Listener> listener;
  try {
    listener = std::make_unique<Listener>("::1");
  } catch (const std::exception& error) {
    GTEST_SKIP() << "no IPv6 loopback here: " << error.what();
  }
  expect_own_connection(*listener);
}

TEST(Identity, AnotherUsersSocketIsThatUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to connect as another user";
  constexpr uid_t kNobody = 65534;
  Listener listener("127.0.0.1");
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // connects as nobody, and holds the connection until told
    close(done[1]);
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0)
      _exit(2);
    const int fd = connect_tcp(listener.address, "test");
    char byte = 0;
    (void)read(done[0], &byte, 1);
    close(fd);
    _exit(0);
  }
  close(done[0]);
  const int served = listener.accept_one();
  ASSERT_GE(served, 0);
  const auto who = peer_identity(served);
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->uid, kNobody);
  close(served);
}

TEST(Identity, APeerThatClosedItsSocketIsNobodys) {
  Listener listener("127.0.0.1");
  for (const bool reset : {false, true}) {
    const int client = connect_tcp(listener.address, "test");
    const int served = listener.accept_one();
    if (reset) {  // gone from the table at once
      const linger now{1, 0};
      setsockopt(client, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
    }
    close(client);  // else closing: held by no process any more
    EXPECT_FALSE(peer_identity(served).has_value()) << (reset ? "reset" : "closed");
    close(served);
  }
}

TEST(Identity, AUnixSocketsPeerIsFromTheKernel) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const auto who = peer_identity(pair[0]);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->uid, geteuid());
  EXPECT_EQ(who->gid, getegid());
  close(pair[0]);
  close(pair[1]);
}

}  // namespace
