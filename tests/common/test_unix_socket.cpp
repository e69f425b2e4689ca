// The daemons' shared Unix sockets (src/common/unix_socket.hpp): the listening socket's file mode,
// a dead owner's socket file replaced and a live one's refused, and the connect helpers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "common/unix_socket.hpp"

namespace {

using harmonia::common::connect_address;
using harmonia::common::connect_unix;
using harmonia::common::listen_unix;

class UnixSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/harmonia-unix-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/s.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  mode_t mode_of(const std::string& path) const {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0);
    return st.st_mode & 0777;
  }

  std::string dir_, path_;
};

std::string message_of(const std::string& path, const char* owner) {
  try {
    close(listen_unix(path, "--socket", owner, 0700));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST_F(UnixSocket, TheFileGetsTheModeAskedForWhateverTheUmask) {
  const mode_t old = umask(0022);
  const int owner_only = listen_unix(path_, "socket", "daemon", 0700);
  EXPECT_EQ(mode_of(path_), 0700U);
  const int everyone = listen_unix(dir_ + "/t.sock", "socket", "daemon", 0666);
  EXPECT_EQ(mode_of(dir_ + "/t.sock"), 0666U);
  // The process's umask is restored.
  EXPECT_EQ(umask(old), 0022U);
  close(owner_only);
  close(everyone);
}

TEST_F(UnixSocket, ALiveOwnersSocketIsRefusedAndADeadOnesReplaced) {
  const int live = listen_unix(path_, "--socket", "agent", 0700);
  EXPECT_EQ(message_of(path_, "agent"), "--socket " + path_ + ": another agent is listening on it");
  close(live);  // the file stays, as a killed daemon leaves it
  ASSERT_TRUE(std::filesystem::exists(path_));
  const int again = listen_unix(path_, "--socket", "agent", 0700);
  const int client = connect_unix(path_, close);
  EXPECT_GE(client, 0);
  close(client);
  close(again);
}

TEST_F(UnixSocket, ATooLongPathIsRefusedByName) {
  const std::string path = dir_ + "/" + std::string(200, 'x');
  EXPECT_EQ(message_of(path, "agent"), "--socket " + path + ": longer than 107 bytes");
  EXPECT_EQ(connect_unix(path, close), -1);
}

TEST_F(UnixSocket, ConnectAddressTakesAPathOrAUnixPrefixAndClosesWhatFailed) {
  const int listener = listen_unix(path_, "socket", "daemon", 0700);
  for (const std::string& address : {path_, "unix:" + path_}) {
    const int fd = connect_address(address, close);
    EXPECT_GE(fd, 0) << address;
    close(fd);
  }
  int closed = 0;
  const auto count_close = [&closed](int fd) {
    ++closed;
    close(fd);
  };
  EXPECT_EQ(connect_address(dir_ + "/nobody.sock", count_close), -1);
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(connect_address("tcp:no-port", count_close), -1);
  close(listener);
}

}  // namespace
