// What staging asks before it takes a file that exists: whether another descriptor of the
// process refers to it (runtime/bbio/open_files.hpp), with descriptors opened, closed and
// changed as the library sees them, and opened behind its back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/bbio/open_files.hpp"

namespace fs = std::filesystem;
namespace open_files = harmonia::bbio::open_files;

namespace {

class OpenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("open_files_" + std::to_string(getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  /// A file of its own, with its identity.
  fs::path file(const std::string& name, struct stat& st) {
    const fs::path path = directory_ / name;
    std::ofstream(path) << name;
    EXPECT_EQ(stat(path.c_str(), &st), 0);
    return path;
  }
  /// Opens as a program through the library would (the open, then changed()).
  static int open_seen(const fs::path& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    open_files::changed(fd);
    return fd;
  }
  static void close_seen(int fd) {
    close(fd);
    open_files::changed(fd);
  }

  fs::path directory_;
};

}  // namespace

TEST_F(OpenFiles, FindsAnotherDescriptorOfTheFileAndNotTheOneAsking) {
  struct stat a {};
  const fs::path path = file("a", a);
  const int first = open_seen(path);
  const int second = open_seen(path);
  EXPECT_TRUE(open_files::others_refer_to(second, a.st_dev, a.st_ino));
  EXPECT_TRUE(open_files::others_refer_to(first, a.st_dev, a.st_ino));
  close_seen(first);
  EXPECT_FALSE(open_files::others_refer_to(second, a.st_dev, a.st_ino)) << "only itself is left";
  close_seen(second);
}

TEST_F(OpenFiles, ANumberClosedAndTakenAgainIsLookedAtAgain) {
  struct stat a {
  }, b{};
  const fs::path path_a = file("a", a);
  const fs::path path_b = file("b", b);
  const int number = open_seen(path_a);
  EXPECT_FALSE(open_files::others_refer_to(-1, b.st_dev, b.st_ino));  // remembers `number`: a
  close_seen(number);
  const int again = open_seen(path_b);
  ASSERT_EQ(again, number) << "the lowest free number";
  EXPECT_TRUE(open_files::others_refer_to(-1, b.st_dev, b.st_ino));
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  close_seen(again);
  EXPECT_FALSE(open_files::others_refer_to(-1, b.st_dev, b.st_ino));
}

TEST_F(OpenFiles, FindsADescriptorOpenedBehindTheLibrarysBack) {
  struct stat a {};
  const fs::path path = file("a", a);
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  // A raw system call: nothing tells the library of it.
  const int unseen = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path.c_str(), O_RDONLY));
  ASSERT_GE(unseen, 0);
  EXPECT_TRUE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  syscall(SYS_close, unseen);
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino)) << "closed: not open now";
}

TEST_F(OpenFiles, FindsADescriptorASeenCallPutHighAboveTheOthers) {
  struct stat a {};
  const fs::path path = file("a", a);
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  const int low = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int high = fcntl(low, F_DUPFD_CLOEXEC, 900);  // far above the process's other numbers
  close(low);
  ASSERT_GE(high, 900);
  open_files::changed(high);
  EXPECT_TRUE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  EXPECT_FALSE(open_files::others_refer_to(high, a.st_dev, a.st_ino));
  // Closed behind the library's back: remembered open, but looked at again before it counts.
  syscall(SYS_close, high);
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
}

TEST_F(OpenFiles, ARangeOfNumbersChangedIsLookedAtAgain) {
  struct stat a {
  }, b{};
  const fs::path path_a = file("a", a);
  const fs::path path_b = file("b", b);
  const int low_a = open(path_a.c_str(), O_RDONLY | O_CLOEXEC);
  const int low_b = open(path_b.c_str(), O_RDONLY | O_CLOEXEC);
  // Far above the process's other numbers, in two words of the remembered bits.
  const int on_a = fcntl(low_a, F_DUPFD_CLOEXEC, 900);
  const int on_b = fcntl(low_b, F_DUPFD_CLOEXEC, 1000);
  close(low_a);
  close(low_b);
  ASSERT_GE(on_a, 900);
  ASSERT_GE(on_b, 1000);
  open_files::changed(on_a);
  open_files::changed(on_b);
  EXPECT_FALSE(open_files::others_refer_to(on_b, b.st_dev, b.st_ino));  // remembers on_a: a
  // on_a now names b, as a call the library sees only as a range (close_range, closefrom) would
  // leave it.
  ASSERT_EQ(syscall(SYS_dup3, on_b, on_a, O_CLOEXEC), on_a);
  open_files::changed_range(static_cast<unsigned>(on_a) - 10, static_cast<unsigned>(on_b) + 10);
  EXPECT_TRUE(open_files::others_refer_to(on_b, b.st_dev, b.st_ino));
  close(on_a);
  close(on_b);
}

TEST_F(OpenFiles, FindsADescriptorAboveTheNumbersItRemembers) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  constexpr rlim_t kHigh = 70000;  // above the 65,536 numbers whose file is remembered
  const rlimit before = limit;
  limit.rlim_cur = kHigh + 1;
  limit.rlim_max = std::max(limit.rlim_max, kHigh + 1);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
    GTEST_SKIP() << "descriptor " << kHigh << " is beyond this process's limit (" << before.rlim_max
                 << "), which only a privileged process may raise";
  struct stat a {};
  const fs::path path = file("a", a);
  const int low = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int high = fcntl(low, F_DUPFD_CLOEXEC, static_cast<int>(kHigh));
  close(low);
  ASSERT_EQ(high, static_cast<int>(kHigh));
  EXPECT_TRUE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  EXPECT_FALSE(open_files::others_refer_to(high, a.st_dev, a.st_ino));
  close(high);
  EXPECT_FALSE(open_files::others_refer_to(-1, a.st_dev, a.st_ino));
  setrlimit(RLIMIT_NOFILE, &before);
}
