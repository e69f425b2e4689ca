// StagedFile, driven directly (no LD_PRELOAD, no scheduler daemon) against buffer nodes of the
// test's own (fake_node.hpp): a directive published as the agent would names the nodes, and
// the file's bytes must go where the rules of docs/buffer-nodes.md say, and always end in the
// file whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

#include "fake_node.hpp"
#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/staged_file.hpp"

namespace fs = std::filesystem;
using harmonia::bbio::Config;
using harmonia::bbio::StagedFile;
using harmonia::testing::FakeNode;
namespace agent = harmonia::bbio::agent;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;
/// Seconds a settle waits for a lost node (HARMONIA_NODE_WAIT, set before the library reads it).
constexpr double kNodeWait = 1.0;

/// The PFS root every test writes beneath (HARMONIA_BUFFER_ROOT, read once per process).
const fs::path& pfs_root() {
  static const fs::path root = [] {
    fs::path made =
        fs::temp_directory_path() / ("harmonia-staged-file-" + std::to_string(getpid()));
    fs::create_directories(made / "pfs");
    return made / "pfs";
  }();
  return root;
}

std::string pattern(std::size_t length, char seed) {
  std::string bytes(length, '\0');
  for (std::size_t i = 0; i < length; ++i)
    bytes[i] = static_cast<char>(seed + static_cast<char>(i % 251));
  return bytes;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void grant(const std::vector<const FakeNode*>& nodes, std::uint64_t stripe) {
  agent::Directive directive;
  directive.stage = true;
  directive.flush_allowed = true;
  for (const FakeNode* node : nodes) directive.grant.nodes.push_back(node->address());
  directive.grant.stripe = stripe;
  directive.grant.job = "staged-file-test";
  agent::publish(std::move(directive));
}

class StagedFileOnNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = std::string("f-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = pfs_root() / name_;
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd_, &st), 0);
    inode_ = st.st_ino;
  }
  void TearDown() override {
    if (file_) {
      std::lock_guard lock(file_->mutex);
      file_->release();
    }
    file_.reset();
    if (fd_ >= 0) close(fd_);
    // No nodes for the next test until it grants its own. The file stays until the end, so
    // that no later test's file reuses its inode, which the library knows held files by.
    agent::publish({});
  }
  void stage(int flags = O_RDWR, std::size_t small_file = Config{}.small_file) {
    Config config;
    config.node_wait = kNodeWait;
    config.small_file = small_file;
    std::string error;
    file_ = StagedFile::create(fd_, path_.string(), flags, config, error);
    ASSERT_TRUE(file_) << error;
  }
  ssize_t write_at(const std::string& bytes, off64_t offset) {
    const iovec part{const_cast<char*>(bytes.data()), bytes.size()};
    std::lock_guard lock(file_->mutex);
    return file_->write_at(&part, 1, offset);
  }
  int settle() {
    std::lock_guard lock(file_->mutex);
    return file_->settle();
  }

  std::string name_;
  fs::path path_;
  int fd_ = -1;
  ino_t inode_ = 0;
  std::unique_ptr<StagedFile> file_;
};

TEST_F(StagedFileOnNodes, AGrantedPhasesWritesWaitOnTheNodeUntilTheFileSettles) {
  FakeNode node(pfs_root());
  grant({&node}, kMiB);
  stage();
  const std::string bytes = pattern(3 * kMiB, 'a');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(node.held_bytes(inode_), bytes.size()) << "the node took the writes";
  EXPECT_EQ(fs::file_size(path_), 0u) << "nothing reached the file yet";
  struct stat st {};
  ASSERT_EQ(fstat(fd_, &st), 0);
  file_->overlay(st);
  EXPECT_EQ(st.st_size, static_cast<off_t>(bytes.size())) << "a stat shows the size written";

  ASSERT_EQ(settle(), 0);
  EXPECT_EQ(node.answered("drain"), 1);
  EXPECT_EQ(node.held_bytes(inode_), 0u);
  EXPECT_EQ(contents(path_), bytes);
}

TEST_F(StagedFileOnNodes, StripesGoToTheGrantedNodesInTurn) {
  FakeNode first(pfs_root()), second(pfs_root());
  grant({&first, &second}, kMiB / 2);
  stage();
  const std::string bytes = pattern(2 * kMiB, 'b');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(first.write_offsets(inode_), (std::vector<std::uint64_t>{0, kMiB}));
  EXPECT_EQ(second.write_offsets(inode_), (std::vector<std::uint64_t>{kMiB / 2, 3 * kMiB / 2}));
  ASSERT_EQ(settle(), 0);
  EXPECT_EQ(contents(path_), bytes);
}

TEST_F(StagedFileOnNodes, ReadsOfWhatTheNodeHoldsComeFromIt) {
  FakeNode node(pfs_root());
  grant({&node}, kMiB);
  stage();
  const std::string bytes = pattern(2 * kMiB, 'c');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  std::string back(4096, '\0');
  iovec into{back.data(), back.size()};
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->read_held(&into, 1, static_cast<off64_t>(kMiB + 100)), 4096);
  }
  EXPECT_EQ(back, bytes.substr(kMiB + 100, 4096));
  EXPECT_EQ(node.answered("read"), 1);
  EXPECT_EQ(fs::file_size(path_), 0u) << "the read did not drain the file";
}

TEST_F(StagedFileOnNodes, AReadThroughAWriteOnlyDescriptorFailsAsPlainIOWould) {
  FakeNode node(pfs_root());
  grant({&node}, kMiB);
  stage(O_WRONLY);
  ASSERT_EQ(write_at(pattern(kMiB, 'd'), 0), static_cast<ssize_t>(kMiB));
  std::string back(16, '\0');
  iovec into{back.data(), back.size()};
  std::lock_guard lock(file_->mutex);
  errno = 0;
  EXPECT_EQ(file_->read_held(&into, 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(node.answered("read"), 0);
}

TEST_F(StagedFileOnNodes, AFullNodeSendsTheWritesToTheFile) {
  FakeNode node(pfs_root());
  node.refuse_writes_as_full(true);
  grant({&node}, kMiB);
  stage();
  const std::string bytes = pattern(2 * kMiB, 'e');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  EXPECT_GE(node.answered("write"), 1) << "the node was asked first";
  EXPECT_EQ(node.held_bytes(inode_), 0u);
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->close_flush(), 0);
  }
  EXPECT_EQ(contents(path_), bytes);
}

TEST_F(StagedFileOnNodes, ACloseWithNoSchedulerToTellDrainsBeforeItReturns) {
  FakeNode node(pfs_root());
  node.publish_succeeds(false);
  grant({&node}, kMiB);
  stage();
  const std::string bytes = pattern(kMiB + 12345, 'f');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->close_flush(), 0);
  }
  EXPECT_EQ(node.answered("publish"), 1);
  EXPECT_EQ(node.answered("drain"), 1);
  EXPECT_EQ(contents(path_), bytes) << "the next open must find the bytes";
}

TEST_F(StagedFileOnNodes, ACloseThatTheNodePublishesLeavesTheBytesHeld) {
  FakeNode node(pfs_root());
  node.publish_succeeds(true);
  grant({&node}, kMiB);
  stage();
  const std::string bytes = pattern(kMiB, 'g');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->close_flush(), 0);
  }
  EXPECT_EQ(node.answered("publish"), 1);
  EXPECT_EQ(node.answered("drain"), 0) << "the scheduler orders the drain, later";
  EXPECT_EQ(node.held_bytes(inode_), bytes.size());
}

/// Writes `bytes` in writes of 4 KiB that continue each other, then closes the file.
void write_small_writes_and_close(StagedFile& file, const std::string& bytes) {
  std::lock_guard lock(file.mutex);
  for (std::size_t at = 0; at < bytes.size(); at += 4096) {
    const std::size_t length = std::min<std::size_t>(4096, bytes.size() - at);
    const iovec part{const_cast<char*>(bytes.data() + at), length};
    ASSERT_EQ(file.write_at(&part, 1, static_cast<off64_t>(at)), static_cast<ssize_t>(length));
  }
  ASSERT_EQ(file.close_flush(), 0);
}

TEST_F(StagedFileOnNodes, ASmallFileTheNodesNeverGotIsWrittenToThePfsAtItsClose) {
  FakeNode node(pfs_root());
  node.publish_succeeds(true);
  grant({&node}, kMiB);
  stage(O_RDWR, 64 << 10);
  const std::string bytes = pattern(64 << 10, 's');
  write_small_writes_and_close(*file_, bytes);
  EXPECT_EQ(contents(path_), bytes) << "in the file at its close";
  EXPECT_EQ(node.answered("write"), 0) << "no byte went to the node";
  EXPECT_EQ(node.answered("publish"), 0) << "nothing for the scheduler to know of";
  EXPECT_EQ(node.held_bytes(inode_), 0u);
}

TEST_F(StagedFileOnNodes, ASettleWritesASmallFileTheNodesNeverGotToThePfs) {
  FakeNode node(pfs_root());
  grant({&node}, kMiB);
  stage(O_RDWR, 64 << 10);
  const std::string bytes = pattern(6000, 'm');
  ASSERT_EQ(write_at(bytes, 0), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(settle(), 0) << "as before a change of its mode or times";
  EXPECT_EQ(contents(path_), bytes);
  EXPECT_EQ(node.answered("write"), 0) << "not sent to a node only to be drained back";
  EXPECT_EQ(node.answered("drain"), 0);
}

TEST_F(StagedFileOnNodes, AFileLargerThanTheSmallFileLimitGoesToTheNodes) {
  FakeNode node(pfs_root());
  node.publish_succeeds(true);
  grant({&node}, kMiB);
  stage(O_RDWR, 64 << 10);
  const std::string bytes = pattern((64 << 10) + 1, 'l');
  write_small_writes_and_close(*file_, bytes);
  EXPECT_EQ(node.held_bytes(inode_), bytes.size()) << "the node holds it, published";
  EXPECT_EQ(node.answered("publish"), 1);
  EXPECT_EQ(fs::file_size(path_), 0u);
}

TEST_F(StagedFileOnNodes, WithNoSmallFileLimitEveryFileGoesToTheNodes) {
  FakeNode node(pfs_root());
  node.publish_succeeds(true);
  grant({&node}, kMiB);
  stage(O_RDWR, 0);
  const std::string bytes = pattern(100, 'z');
  write_small_writes_and_close(*file_, bytes);
  EXPECT_EQ(node.held_bytes(inode_), bytes.size());
  EXPECT_EQ(fs::file_size(path_), 0u);
}

TEST_F(StagedFileOnNodes, ASmallFileAfterItsBytesWentToTheNodesStaysWithThem) {
  FakeNode node(pfs_root());
  node.publish_succeeds(true);
  grant({&node}, kMiB);
  stage(O_RDWR, 64 << 10);
  const std::string first = pattern(4096, 'a'), later = pattern(4096, 'b');
  ASSERT_EQ(write_at(first, 0), 4096);
  ASSERT_EQ(write_at(later, 8192), 4096) << "not continuing the run: the first one is sent";
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->close_flush(), 0);
  }
  EXPECT_EQ(node.held_bytes(inode_), 8192u) << "both runs on the node: one place for the file";
  EXPECT_EQ(fs::file_size(path_), 0u);
}

TEST_F(StagedFileOnNodes, NewNodesGetTheWritesOnlyAfterTheOldOnesDrained) {
  FakeNode old_node(pfs_root()), new_node(pfs_root());
  grant({&old_node}, kMiB);
  stage();
  const std::string first = pattern(kMiB, 'h');
  ASSERT_EQ(write_at(first, 0), static_cast<ssize_t>(first.size()));
  grant({&new_node}, kMiB);                        // the next phase is placed elsewhere
  const std::string rewrite = pattern(kMiB, 'i');  // not gathered: it leaves at once
  ASSERT_EQ(write_at(rewrite, static_cast<off64_t>(kMiB / 4)), static_cast<ssize_t>(kMiB));
  EXPECT_EQ(old_node.answered("drain"), 1) << "the old node's bytes went first";
  EXPECT_EQ(old_node.held_bytes(inode_), 0u);
  EXPECT_EQ(new_node.held_bytes(inode_), rewrite.size());
  ASSERT_EQ(settle(), 0);
  const std::string expected = first.substr(0, kMiB / 4) + rewrite;
  EXPECT_EQ(contents(path_), expected) << "the later bytes win";
}

TEST_F(StagedFileOnNodes, ALostNodeFailsTheSettleWithEIOWithinItsWaitAndFencesLaterWrites) {
  FakeNode node(pfs_root());
  grant({&node}, kMiB);
  stage();
  ASSERT_EQ(write_at(pattern(kMiB, 'j'), 0), static_cast<ssize_t>(kMiB));
  node.die();
  const auto started = std::chrono::steady_clock::now();
  errno = 0;
  EXPECT_EQ(settle(), -1);
  EXPECT_EQ(errno, EIO) << "the file lacks the node's bytes: nothing may read it as whole";
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(waited, kNodeWait + 6.0) << "bounded by the node wait and one node timeout";

  // A write of that range now goes to the file, fenced: if the node comes back, its drain must
  // skip the newer bytes.
  grant({}, kMiB);
  const std::string newer = pattern(4096, 'k');
  ASSERT_EQ(write_at(newer, 0), 4096);
  {
    std::lock_guard lock(file_->mutex);
    ASSERT_EQ(file_->flush(), 0);
  }
  EXPECT_EQ(contents(path_).substr(0, 4096), newer);
  const fs::path fence =
      pfs_root() / ".harmonia" / "fences" / node.address() / std::to_string(inode_);
  EXPECT_TRUE(fs::exists(fence)) << fence;
}

}  // namespace

int main(int argc, char** argv) {
  // Read once by the library, so before any test: where the nodes drain, how long a lost one is
  // waited for, and no scheduler daemon and no MUNGE (the fake nodes trust loopback).
  setenv("HARMONIA_BUFFER_ROOT", pfs_root().c_str(), 1);
  setenv("HARMONIA_NODE_WAIT", std::to_string(kNodeWait).c_str(), 1);
  unsetenv("HARMONIA_SCHEDD");
  setenv("HARMONIA_MUNGE_SOCKET", (pfs_root() / "no-munged").c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  fs::remove_all(pfs_root().parent_path());
  return failed;
}
