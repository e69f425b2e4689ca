// What a buffer node touches stays beneath its roots (docs/security.md, "Paths and fences"):
// symbolic links planted or swapped in under the PFS root or among the fences are never
// followed, names that would leave the root are refused, and a fence forged by another user
// does not make a drain skip acknowledged bytes. Each test runs with openat2 and with the
// O_NOFOLLOW walk used where the kernel has no openat2.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "bbd/store.hpp"
#include "common/beneath.hpp"
#include "storage/fences.hpp"

using namespace harmonia::bbd;
namespace fs = std::filesystem;
namespace fences = harmonia::storage::fences;
namespace common = harmonia::common;

namespace {

constexpr uid_t kNobody = 65534;

/// A descriptor of a directory, closed when it goes.
struct Dir {
  explicit Dir(const fs::path& path) : fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}
  ~Dir() { close(fd); }
  int fd;
};

/// The name of the fences of `path`: its inode (fences are kept by file, not by name).
std::string fence_name(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? std::to_string(st.st_ino) : "no such file";
}

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// Every entry under `dir` (links not followed).
std::vector<fs::path> tree(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) out.push_back(entry.path());
  return out;
}

/// The parameter: whether openat2 is used (else the O_NOFOLLOW walk).
class PathsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    common::use_openat2(GetParam());
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : name)
      if (c == '/') c = '-';
    root_ = fs::temp_directory_path() / ("harmonia-paths-" + std::to_string(getpid()) + "-" + name);
    fs::remove_all(root_);
    fs::create_directories(device());
    fs::create_directories(pfs());
    fs::create_directories(outside());
    std::ofstream(outside() / "victim") << "precious";
    chmod((outside() / "victim").c_str(), 0600);
  }
  void TearDown() override {
    common::use_openat2(true);
    fs::remove_all(root_);
  }

  fs::path device() const { return root_ / "dev"; }
  fs::path pfs() const { return root_ / "pfs"; }
  fs::path outside() const { return root_ / "outside"; }
  std::unique_ptr<Store> open() { return std::make_unique<Store>(device(), pfs(), 1 << 20); }
  /// What is outside the root is as SetUp left it.
  void expect_outside_untouched() const {
    EXPECT_EQ(tree(outside()), std::vector<fs::path>{outside() / "victim"});
    EXPECT_EQ(contents(outside() / "victim"), "precious");
  }

  fs::path root_;
  std::string why_;
};

INSTANTIATE_TEST_SUITE_P(Resolution, PathsTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "openat2" : "walk"; });

}  // namespace

TEST_P(PathsTest, TheHelperRefusesLinksDotDotAndAbsoluteNames) {
  fs::create_directories(pfs() / "real/sub");
  std::ofstream(pfs() / "real/sub/f") << "x";
  fs::create_directory_symlink(outside(), pfs() / "evil");
  fs::create_symlink(outside() / "victim", pfs() / "real/link");
  const Dir root(pfs());
  const int fd = common::open_beneath(root.fd, "real/sub/f", O_RDONLY);
  EXPECT_GE(fd, 0) << "a plain path opens";
  close(fd);
  for (const auto& [name, error] :
       std::vector<std::pair<std::string, int>>{{"evil/victim", ELOOP},
                                                {"evil/new", ELOOP},
                                                {"real/link", ELOOP},
                                                {"../outside/victim", EXDEV},
                                                {"real/../../outside/victim", EXDEV},
                                                {(outside() / "victim").string(), EXDEV},
                                                {"", EXDEV}}) {
    errno = 0;
    EXPECT_EQ(common::open_beneath(root.fd, name, O_WRONLY | O_CREAT, 0644), -1) << name;
    EXPECT_EQ(errno, error) << name;
  }
  EXPECT_EQ(common::make_dirs_beneath(root.fd, "evil/made/here", 0755, O_PATH), -1);
  EXPECT_EQ(errno, ELOOP);
  const int made = common::make_dirs_beneath(root.fd, "new/dirs", 0755, O_PATH);
  EXPECT_GE(made, 0);
  close(made);
  EXPECT_TRUE(fs::is_directory(pfs() / "new/dirs"));
  EXPECT_NE(common::beneath_error("pfs/evil/x", ELOOP).find("pfs/evil/x: refused: a symbolic link"),
            std::string::npos);
  expect_outside_untouched();
}

TEST_P(PathsTest, AWriteUnderALinkedDirectoryIsRefusedAndNothingLeavesTheRoot) {
  fs::create_directory_symlink(outside(), pfs() / "evil");
  fs::create_directories(pfs() / "ok");
  fs::create_directory_symlink(outside(), pfs() / "ok/deeper");
  auto store = open();
  for (const std::string name : {"evil/x", "evil/new/dir/x", "ok/deeper/x", "evil/victim"}) {
    EXPECT_EQ(store->write(name, 0, "attack", "", why_), Status::Invalid) << name;
    EXPECT_NE(why_.find(name), std::string::npos) << why_;
    EXPECT_NE(why_.find("symbolic link"), std::string::npos) << why_;
  }
  EXPECT_EQ(store->drain("", why_), Status::Ok);
  EXPECT_EQ(store->stats().used, 0u);
  expect_outside_untouched();
}

TEST_P(PathsTest, ALinkedTargetFileIsNotOverwritten) {
  fs::create_symlink(outside() / "victim", pfs() / "out.dat");
  auto store = open();
  EXPECT_EQ(store->write("out.dat", 0, "attack", "", why_), Status::Invalid);
  EXPECT_NE(why_.find("out.dat: refused: a symbolic link"), std::string::npos) << why_;
  expect_outside_untouched();
}

TEST_P(PathsTest, ALinkSwappedInAfterTheWriteChangesNothingTheDrainWrites) {
  fs::create_directories(pfs() / "run");
  auto store = open();
  ASSERT_EQ(store->write("run/out.dat", 0, "data", "", why_), Status::Ok) << why_;
  ASSERT_EQ(store->write("victim", 0, "data", "", why_), Status::Ok) << why_;
  // Between the acknowledged writes and their drain, another user swaps links in for the
  // directory and the file the first writes made.
  fs::remove_all(pfs() / "run");
  fs::remove(pfs() / "victim");
  fs::create_directory_symlink(outside(), pfs() / "run");
  fs::create_symlink(outside() / "victim", pfs() / "victim");
  // The drains write through the descriptors opened at the first writes: to the files those
  // were (deleted since), never through a name.
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(store->stats().used, 0u);
  expect_outside_untouched();
  EXPECT_TRUE(fs::is_symlink(pfs() / "run"));
  EXPECT_TRUE(fs::is_symlink(pfs() / "victim"));
}

TEST_P(PathsTest, DotDotAndAbsoluteNamesAreRefused) {
  auto store = open();
  for (const std::string& name : std::vector<std::string>{"../outside/x", "a/../../outside/x",
                                                          (outside() / "x").string(), ".."}) {
    EXPECT_EQ(store->write(name, 0, "x", "", why_), Status::Invalid) << name;
    EXPECT_EQ(store->drain(name, why_), Status::Invalid) << name;
  }
  expect_outside_untouched();
}

TEST_P(PathsTest, TheFenceSweepNeverLeavesTheRoot) {
  std::ofstream(outside() / "sub-file") << "keep";
  fs::create_directories(outside() / "d");
  std::ofstream(outside() / "d/deep") << "keep";
  const auto before = tree(outside());
  // The node's fence directory itself, and a directory inside it, are links outside.
  fs::create_directories(pfs() / ".harmonia/fences/n:2");
  fs::create_directory_symlink(outside(), pfs() / ".harmonia/fences/n:1");
  fs::create_directory_symlink(outside(), pfs() / ".harmonia/fences/n:2/sub");
  std::ofstream(pfs() / ".harmonia/fences/n:2/stale") << "x";
  for (const std::string node : {"n:1", "n:2"}) {
    auto store = open();
    store->set_fence_node(node);  // sweeps at once
    store->drop_stale_fences();
  }
  EXPECT_EQ(tree(outside()), before);
  EXPECT_EQ(contents(outside() / "d/deep"), "keep");
  EXPECT_FALSE(fs::exists(pfs() / ".harmonia/fences/n:2/stale")) << "a real stale fence goes";
  EXPECT_TRUE(fs::is_symlink(pfs() / ".harmonia/fences/n:2/sub"));
}

TEST_P(PathsTest, TheFenceDirectoryAboveTheNodesIsALink) {
  std::ofstream(outside() / "n:1") << "keep";
  fs::create_directories(pfs() / ".harmonia");
  fs::create_directory_symlink(outside(), pfs() / ".harmonia/fences");
  auto store = open();
  store->set_fence_node("n:1");
  ASSERT_EQ(store->write("f", 0, "data", "", why_), Status::Ok);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << "drains go on without the lock";
  EXPECT_EQ(contents(pfs() / "f"), "data");
  EXPECT_EQ(contents(outside() / "n:1"), "keep");
  EXPECT_FALSE(fs::exists(outside() / "n:1.lock"));
}

TEST_P(PathsTest, RemovingAFenceDoesNotUnlinkThroughALinkedDirectory) {
  fs::create_directories(pfs() / ".harmonia/fences/n:1");
  fs::create_directory_symlink(outside(), pfs() / ".harmonia/fences/n:1/sub");
  auto store = open();
  store->set_fence_node("n:1");
  ASSERT_EQ(store->write("sub/victim", 0, "data", "", why_), Status::Ok);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(contents(pfs() / "sub/victim"), "data") << "no fence is read through the link";
  expect_outside_untouched();
}

TEST_P(PathsTest, FenceDirectoriesAreStickyAndWritableByAllWhateverTheUmask) {
  fs::create_directories(pfs() / ".harmonia");
  chmod((pfs() / ".harmonia").c_str(), 0777);  // made writable by all, without the sticky bit
  // A root daemon's usual umask, which would leave the directories it makes drwxr-xr-t: no
  // user's job could then fence.
  const mode_t old_umask = umask(022);
  auto store = open();
  store->set_fence_node("n:1");
  umask(old_umask);
  for (const auto& dir :
       {pfs() / ".harmonia", pfs() / ".harmonia/fences", pfs() / ".harmonia/fences/n:1"}) {
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 07777, 01777u) << dir;
  }
}

TEST_P(PathsTest, AFenceForgedByAnotherUserIsIgnored) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to give a fence to another user (chown)";
  // The attack of issue 20: a fence covering everything, written before the job's write and
  // drain, by a user who owns neither the file nor the node.
  fs::create_directories(pfs() / "run");
  std::ofstream(pfs() / "run/out.dat") << "";  // the job's file, owned by root
  const std::string fence = fence_name(pfs() / "run/out.dat");
  auto store = open();
  store->set_fence_node("n:1");  // (its sweep would delete fences of files it holds nothing of)
  {
    const Dir root(pfs());
    ASSERT_TRUE(fences::append(root.fd, "n:1", fence, {0, 1ULL << 62}));
  }
  ASSERT_EQ(chown((pfs() / ".harmonia/fences/n:1" / fence).c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(store->write("run/out.dat", 0, "acknowledged", "job", why_), Status::Ok);
  ASSERT_EQ(store->write("new.dat", 0, "acknowledged", "job", why_), Status::Ok);
  {
    const Dir root(pfs());
    std::string ignored;
    EXPECT_TRUE(fences::read(root.fd, "n:1", fence, 0, &ignored).empty());
    EXPECT_NE(ignored.find("owned by uid 65534"), std::string::npos) << ignored;
  }
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(contents(pfs() / "run/out.dat"), "acknowledged");
  EXPECT_EQ(contents(pfs() / "new.dat"), "acknowledged") << "a file named only, made at its write";
  // Only the directory of staged-in copies is left.
  EXPECT_EQ(std::distance(fs::directory_iterator(device()), {}), 1)
      << "the log went only once its bytes were in the PFS";
}

TEST_P(PathsTest, AFenceOfTheFilesOwnerIsHonoured) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to give files to another user (chown)";
  {
    auto store = open();
    ASSERT_EQ(store->write("f", 0, std::string(10, 'A'), "job", why_), Status::Ok);
  }  // the node dies; the file's owner writes [2, 6) through to the PFS, fenced
  std::ofstream(pfs() / "f") << "..BBBB";
  ASSERT_EQ(chown((pfs() / "f").c_str(), kNobody, kNobody), 0);
  const std::string fence = fence_name(pfs() / "f");
  {
    const Dir root(pfs());
    ASSERT_TRUE(fences::append(root.fd, "n:1", fence, {2, 4}));
  }
  ASSERT_EQ(chown((pfs() / ".harmonia/fences/n:1" / fence).c_str(), kNobody, kNobody), 0);
  auto store = open();
  store->set_fence_node("n:1");
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(contents(pfs() / "f"), "AABBBBAAAA");
}

TEST_P(PathsTest, AHardLinkedOrLinkedFenceIsIgnored) {
  fs::create_directories(pfs() / ".harmonia/fences/n:1");
  {
    const Dir root(pfs());
    ASSERT_TRUE(fences::append(root.fd, "n:1", "f", {0, 1ULL << 62}));
  }
  fs::create_hard_link(pfs() / ".harmonia/fences/n:1/f", root_ / "second-link");
  fs::create_symlink(pfs() / ".harmonia/fences/n:1/f", pfs() / ".harmonia/fences/n:1/g");
  const Dir root(pfs());
  EXPECT_TRUE(fences::read(root.fd, "n:1", "f", geteuid()).empty());
  EXPECT_TRUE(fences::read(root.fd, "n:1", "g", geteuid()).empty());
}
