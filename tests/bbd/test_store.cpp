// A buffer node's store on real directories: writes, reads of held data, drains to the PFS,
// capacity, recovery of the logs after a crash, and the names and offsets it refuses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "bbd/store.hpp"
#include "storage/fences.hpp"

using namespace harmonia::bbd;
namespace fs = std::filesystem;

namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("harmonia-store-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(device());
    fs::create_directories(pfs());
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path device() const { return root_ / "dev"; }
  fs::path pfs() const { return root_ / "pfs"; }
  std::unique_ptr<Store> open(std::uint64_t capacity = 1 << 20) {
    return std::make_unique<Store>(device(), pfs(), capacity);
  }
  std::string pfs_file(const std::string& name) const {
    std::ifstream in(pfs() / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::vector<fs::path> logs() const {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(device()))
      if (entry.path().extension() == ".bblog") out.push_back(entry.path());
    return out;
  }

  fs::path root_;
  std::string why_;
};

}  // namespace

TEST_F(StoreTest, ReadsSeeTheLatestWriteAndTheDrainLeavesThatInThePfs) {
  auto store = open();
  ASSERT_EQ(store->write("run/out.dat", 0, std::string(100, 'a'), "job", why_), Status::Ok);
  ASSERT_EQ(store->write("run/out.dat", 50, std::string(100, 'b'), "job", why_), Status::Ok);
  ASSERT_EQ(store->write("run/out.dat", 10, "cc", "job", why_), Status::Ok);
  std::string out;
  ASSERT_EQ(store->read("run/out.dat", 0, 150, out, why_), Status::Ok);
  std::string expected = std::string(50, 'a') + std::string(100, 'b');
  expected.replace(10, 2, "cc");
  EXPECT_EQ(out, expected);
  EXPECT_EQ(store->read("run/out.dat", 140, 20, out, why_), Status::NotHeld) << "past the end";
  EXPECT_EQ(store->read("other", 0, 1, out, why_), Status::NotHeld);
  EXPECT_EQ(store->stats().used, 202u);
  EXPECT_EQ(store->stats().held_by_job.at("job"), 202u);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("run/out.dat"), expected);
  EXPECT_EQ(store->stats().used, 0u);
  EXPECT_EQ(store->stats().drained, 202u);
  // Only the directory of staged-in copies is left.
  EXPECT_EQ(std::distance(fs::directory_iterator(device()), {}), 1)
      << "the log and its job went with the drain";
}

TEST_F(StoreTest, AFullStoreRefusesAndKeepsWhatItHolds) {
  auto store = open(100);
  ASSERT_EQ(store->write("f", 0, std::string(80, 'x'), "", why_), Status::Ok);
  EXPECT_EQ(store->write("f", 80, std::string(21, 'y'), "", why_), Status::Full);
  EXPECT_NE(why_.find("20 bytes left"), std::string::npos) << why_;
  ASSERT_EQ(store->write("f", 80, std::string(20, 'y'), "", why_), Status::Ok);
  ASSERT_EQ(store->drain("f", why_), Status::Ok);
  EXPECT_EQ(pfs_file("f"), std::string(80, 'x') + std::string(20, 'y'));
}

TEST_F(StoreTest, RecoveryKeepsCompleteRecordsAndDropsATornTail) {
  {
    auto store = open();
    ASSERT_EQ(store->write("a", 0, "hello ", "j", why_), Status::Ok);
    ASSERT_EQ(store->write("a", 6, "world", "j", why_), Status::Ok);
  }  // the node dies
  ASSERT_EQ(logs().size(), 1u);
  {
    // A record the node was writing when it died: its header and part of its data.
    std::ofstream torn(logs()[0], std::ios::binary | std::ios::app);
    const std::string half(40, '\x7f');
    torn.write(half.data(), static_cast<std::streamsize>(half.size()));
  }
  auto store = open();
  EXPECT_EQ(store->stats().used, 11u);
  EXPECT_EQ(store->stats().held_by_job.at("j"), 11u) << "a recovered log keeps its job";
  std::string file;
  ASSERT_EQ(store->drain_next({}, file, why_), Status::Ok) << "recovered logs always drain";
  EXPECT_EQ(file, "a");
  EXPECT_EQ(pfs_file("a"), "hello world");
  EXPECT_EQ(store->drain_next({}, file, why_), Status::NotHeld);
}

TEST_F(StoreTest, DrainsFollowTheJobsAsked) {
  auto store = open();
  ASSERT_EQ(store->write("a", 0, "1", "job-a", why_), Status::Ok);
  ASSERT_EQ(store->write("b", 0, "2", "job-b", why_), Status::Ok);
  std::string file;
  ASSERT_EQ(store->drain_next({"job-b"}, file, why_), Status::Ok);
  EXPECT_EQ(file, "b");
  EXPECT_EQ(store->drain_next({"job-b"}, file, why_), Status::NotHeld);
  EXPECT_EQ(store->stats().held_by_job.count("job-a"), 1u);
}

TEST_F(StoreTest, NamesThatLeaveTheRootAndImpossibleOffsetsAreRefused) {
  auto store = open();
  for (const std::string& name : std::vector<std::string>{
           "", "/etc/passwd", "../x", "a/../../x", "./a", "a//b", "a/", std::string("a\0b", 3),
           std::string(256, 'n'), "ok/" + std::string(300, 'n')})
    EXPECT_EQ(store->write(name, 0, "x", "", why_), Status::Invalid) << name;
  EXPECT_EQ(store->write(std::string(255, 'n'), 0, "x", "", why_), Status::Ok);
  EXPECT_EQ(store->write("f", ~0ULL - 1, "xy", "", why_), Status::Invalid);
  EXPECT_EQ(store->write("f", 1ULL << 63, "x", "", why_), Status::Invalid);
  std::string out;
  EXPECT_EQ(store->read("f", 0, (64ULL << 20) + 1, out, why_), Status::Invalid);
  EXPECT_EQ(store->drain("../x", why_), Status::Invalid);
  EXPECT_EQ(store->stats().used, 1u);
}

TEST_F(StoreTest, AnUnusableDirectoryIsNamed) {
  try {
    Store store(root_ / "missing", pfs(), 1 << 20);
    FAIL() << "a missing device directory was accepted";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("missing"), std::string::npos) << error.what();
  }
  EXPECT_THROW(Store(device(), pfs(), 1 << 20, "no-such-scheduler"), std::invalid_argument);
}

namespace {

namespace fences = harmonia::storage::fences;

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

/// The fence clients leave for node "n:1" on `file` (docs/buffer-nodes.md, "Fences").
void fence(const fs::path& pfs, const std::string& file, std::uint64_t offset,
           std::uint64_t length) {
  ASSERT_TRUE(fences::append(Dir(pfs).fd, "n:1", fence_name(pfs / file), {offset, length}));
}

/// The ranges node "n:1" would skip in `file` (owned by this process's user).
std::vector<fences::Range> fenced(const fs::path& pfs, const std::string& file) {
  return fences::read(Dir(pfs).fd, "n:1", fence_name(pfs / file), geteuid());
}

/// While one lives, files of this process may not grow past `bytes`: writes beyond fail with
/// EFBIG, as on a PFS that refuses them.
struct FileSizeLimit {
  explicit FileSizeLimit(rlim_t bytes) {
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &saved);
    rlimit limited = saved;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved); }
  rlimit saved{};
};

/// Holds the store's writes at chosen file offsets once their bytes are in the log, before they
/// commit (Store::on_copied), until opened; and tells which writes got that far.
class CopyGate {
 public:
  CopyGate(Store& store, std::set<std::uint64_t> held) : held_(std::move(held)) {
    store.on_copied([this](std::uint64_t offset) {
      std::unique_lock lock(mutex_);
      copied_.insert(offset);
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_ || !held_.contains(offset); });
    });
  }
  /// Whether the write at `offset` has copied its bytes (waiting up to 10 s for it).
  bool copied(std::uint64_t offset) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10),
                             [&] { return copied_.contains(offset); });
  }
  /// Lets the write held at `offset` go on.
  void release(std::uint64_t offset) {
    std::lock_guard lock(mutex_);
    held_.erase(offset);
    changed_.notify_all();
  }
  /// Lets every held write go on.
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::uint64_t> held_, copied_;
  bool open_ = false;
};

/// Whether `done` is still unfinished after 200 ms.
bool still_running(const std::future<Status>& done) {
  return done.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout;
}

/// The inode of `path`, as a client's fstat gives it to the node.
std::uint64_t inode_of(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

TEST_F(StoreTest, ADrainSkipsTheFencedRanges) {
  {
    auto store = open();
    ASSERT_EQ(store->write("f", 0, std::string(100, 'A'), "job", why_), Status::Ok);
  }  // the node dies; its client writes [20, 40) through to the PFS, fenced
  std::ofstream(pfs() / "f") << std::string(20, '\0') << std::string(20, 'B');
  fence(pfs(), "f", 20, 10);
  fence(pfs(), "f", 25, 15);  // overlapping entries merge
  auto store = open();        // recovers the log, and its job
  EXPECT_EQ(store->stats().held_by_job.at("job"), 100u);
  store->set_fence_node("n:1");
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), std::string(20, 'A') + std::string(20, 'B') + std::string(60, 'A'));
  EXPECT_TRUE(fenced(pfs(), "f").empty()) << "the drain consumed it";
  EXPECT_EQ(store->stats().drained_by_job.at("job"), 100u);
}

TEST_F(StoreTest, FencesOfFilesTheNodeHoldsNothingOfAreDropped) {
  auto store = open();
  ASSERT_EQ(store->write("held", 0, "x", "", why_), Status::Ok);
  fence(pfs(), "held", 0, 1);
  ASSERT_TRUE(fences::append(Dir(pfs()).fd, "n:1", "4242424242", {0, 1}));  // a file gone
  // A link planted among the fences is neither followed nor removed through.
  std::ofstream(root_ / "victim") << std::string(64, 'v');
  fs::create_symlink(root_ / "victim", pfs() / ".harmonia/fences/n:1/link");
  store->set_fence_node("n:1");
  EXPECT_EQ(fenced(pfs(), "held").size(), 1u);
  EXPECT_TRUE(fences::read(Dir(pfs()).fd, "n:1", "4242424242", geteuid()).empty());
  EXPECT_TRUE(fs::is_symlink(pfs() / ".harmonia/fences/n:1/link"));
  EXPECT_TRUE(fs::exists(root_ / "victim"));
  EXPECT_EQ(store->write(".harmonia/fences/n:1/held", 0, "x", "", why_), Status::Invalid)
      << "clients cannot write the fences";
}

TEST_F(StoreTest, APfsThatFailsKeepsTheDataHeldForTheNextDrain) {
  auto store = open();
  ASSERT_EQ(store->write("dir/f", 0, "data", "", why_), Status::Ok);
  // The first write made the file (as its writer); the PFS then refuses to let it grow.
  EXPECT_TRUE(fs::exists(pfs() / "dir/f"));
  {
    const FileSizeLimit full(2);
    EXPECT_EQ(store->drain("", why_), Status::Error);
  }
  EXPECT_NE(why_.find("dir/f"), std::string::npos) << why_;
  EXPECT_EQ(store->stats().used, 4u);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("dir/f"), "data");
}

TEST_F(StoreTest, AFailedDrainNamesItsFileAndWhoseDataItIs) {
  auto store = open();
  ASSERT_EQ(store->write("small", 0, "a", "job-a", why_), Status::Ok);
  ASSERT_EQ(store->write("large", 0, "data", "job-b", why_), Status::Ok);
  std::string file;
  Status status = Status::Ok;
  {
    const FileSizeLimit full(2);  // "small" fits, "large" does not
    while ((status = store->drain_next({"job-a", "job-b"}, file, why_)) == Status::Ok) {
    }
  }
  ASSERT_EQ(status, Status::Error);
  EXPECT_EQ(file, "large") << "the file that failed, whatever drained before it";
  const auto writer = store->writer_of(file);
  ASSERT_TRUE(writer.has_value());
  EXPECT_EQ(writer->job, "job-b");
  EXPECT_EQ(writer->uid, geteuid());
  EXPECT_FALSE(store->writer_of("small").has_value()) << "drained: no longer held";
  EXPECT_FALSE(store->writer_of("never-written").has_value());
}

TEST_F(StoreTest, AFileKeepsItsSegmentsInOrderThroughAFailedDrainAndARestart) {
  {
    auto store = open();
    ASSERT_EQ(store->write("f", 0, "older", "", why_), Status::Ok);
    {
      const FileSizeLimit full(2);
      ASSERT_EQ(store->drain("", why_), Status::Error);
    }
    // The failed drain sealed the first segment: this write goes to a second one.
    ASSERT_EQ(store->write("f", 0, "newer", "", why_), Status::Ok);
    EXPECT_EQ(logs().size(), 2u);
  }  // the node dies
  auto store = open();
  EXPECT_EQ(store->stats().used, 10u);
  EXPECT_EQ(store->stats().files, 1u);
  std::string out;
  ASSERT_EQ(store->read("f", 0, 5, out, why_), Status::Ok);
  EXPECT_EQ(out, "newer");
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), "newer") << "the later segment's write lands last";
  EXPECT_TRUE(logs().empty());
}

TEST_F(StoreTest, DataFollowsItsFileThroughARenameAndVanishesWithADeletedOne) {
  std::ofstream(pfs() / "out.tmp") << "";
  std::ofstream(pfs() / "scratch") << "";
  fs::permissions(pfs() / "out.tmp", fs::perms::owner_read | fs::perms::owner_write);
  auto store = open();
  ASSERT_EQ(store->write({"out.tmp", inode_of(pfs() / "out.tmp")}, 0, "checkpoint", "job", why_),
            Status::Ok)
      << why_;
  ASSERT_EQ(store->write({"scratch", inode_of(pfs() / "scratch")}, 0, "temporary", "job", why_),
            Status::Ok);
  // The atomic save: the file renamed over its target after its close; the scratch file gone.
  std::ofstream(pfs() / "out") << "old version";
  fs::rename(pfs() / "out.tmp", pfs() / "out");
  fs::remove(pfs() / "scratch");
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("out"), "checkpoint");
  EXPECT_FALSE(fs::exists(pfs() / "out.tmp")) << "the old name does not come back";
  EXPECT_FALSE(fs::exists(pfs() / "scratch")) << "a deleted file does not come back";
  EXPECT_EQ(fs::status(pfs() / "out").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write)
      << "the mode the program created it with";
  EXPECT_EQ(store->stats().used, 0u);
}

TEST_F(StoreTest, AWriteForAFileThatIsNoLongerTheOneOpenedIsRefused) {
  std::ofstream(pfs() / "a") << "";
  std::ofstream(pfs() / "b") << "";
  auto store = open();
  EXPECT_EQ(store->write({"a", inode_of(pfs() / "b")}, 0, "x", "job", why_), Status::Invalid);
  EXPECT_NE(why_.find("renamed or replaced"), std::string::npos) << why_;
  EXPECT_EQ(store->write({"gone", 12345}, 0, "x", "job", why_), Status::Invalid)
      << "a client's file is never made by the node";
  EXPECT_FALSE(fs::exists(pfs() / "gone"));
  EXPECT_EQ(store->stats().used, 0u);
  EXPECT_EQ(store->stats().files, 0u);
}

TEST_F(StoreTest, AFileRenamedOrDeletedWhileTheNodeWasDownIsFoundByItsHandle) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: only CAP_DAC_READ_SEARCH opens file handles";
  std::ofstream(pfs() / "moved.tmp") << "";
  std::ofstream(pfs() / "deleted") << "";
  {
    auto store = open();
    ASSERT_EQ(store->write({"moved.tmp", inode_of(pfs() / "moved.tmp")}, 0, "data", "", why_),
              Status::Ok);
    ASSERT_EQ(store->write({"deleted", inode_of(pfs() / "deleted")}, 0, "gone", "", why_),
              Status::Ok);
  }  // the node dies; meanwhile the program renames one file and deletes the other
  fs::create_directories(pfs() / "final");
  fs::rename(pfs() / "moved.tmp", pfs() / "final/moved");
  fs::remove(pfs() / "deleted");
  auto store = open();
  EXPECT_EQ(store->stats().used, 4u) << "the deleted file's bytes were dropped at recovery";
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("final/moved"), "data");
  EXPECT_FALSE(fs::exists(pfs() / "moved.tmp"));
  EXPECT_FALSE(fs::exists(pfs() / "deleted"));
}

TEST_F(StoreTest, AFileNotFoundAgainAfterARestartStaysHeldAsAnOrphan) {
  std::ofstream(pfs() / "a.tmp") << "";
  {
    auto store = open();
    ASSERT_EQ(store->write({"a.tmp", inode_of(pfs() / "a.tmp")}, 0, "data", "", why_), Status::Ok);
  }
  // As on a node that may not open file handles: only the name and inode are left to go by.
  for (const auto& entry : fs::directory_iterator(device()))
    if (entry.path().extension() == ".bbfile") {
      std::ifstream in(entry.path());
      std::string text((std::istreambuf_iterator<char>(in)), {});
      const auto at = text.find("\"handle\":\"");
      const auto end = text.find('"', at + 10);
      text.erase(at + 10, end - at - 10);
      std::ofstream(entry.path()) << text;
    }
  fs::rename(pfs() / "a.tmp", pfs() / "a");
  auto store = open();
  EXPECT_EQ(store->stats().orphaned, 4u);
  EXPECT_EQ(store->drain("", why_), Status::Error);
  EXPECT_NE(why_.find("not found again"), std::string::npos) << why_;
  EXPECT_EQ(pfs_file("a"), "") << "nothing written where the name may now be another file's";
  EXPECT_FALSE(fs::exists(pfs() / "a.tmp"));
}

TEST_F(StoreTest, ADrainHoldsUpNoWriteOfAnotherFile) {
  auto store = open(1ULL << 30);
  const std::string block(8 << 20, 'a');
  for (std::uint64_t at = 0; at < (256ULL << 20); at += block.size())
    ASSERT_EQ(store->write("big", at, block, "job", why_), Status::Ok);
  std::thread drain([&] {
    std::string why;
    EXPECT_EQ(store->drain("big", why), Status::Ok) << why;
  });
  while (!store->stats().draining) std::this_thread::yield();
  ASSERT_EQ(store->write("small", 0, "written while the other drains", "job", why_), Status::Ok);
  std::string out;
  ASSERT_EQ(store->read("small", 0, 7, out, why_), Status::Ok);
  const bool still_draining = store->stats().draining;
  drain.join();
  EXPECT_TRUE(still_draining) << "the write and read waited for the whole drain";
  EXPECT_EQ(fs::file_size(pfs() / "big"), 256ULL << 20);
}

TEST_F(StoreTest, WritesOfOneFileCopyTogetherAndCommitInTheirOrder) {
  auto store = open();
  CopyGate gate(*store, {0});
  auto first = std::async(std::launch::async, [&] {
    return store->write("shared", 0, std::string(100, 'a'), "", why_);
  });
  EXPECT_TRUE(gate.copied(0));
  std::string why;
  auto second = std::async(std::launch::async, [&] {
    return store->write("shared", 50, std::string(100, 'b'), "", why);
  });
  EXPECT_TRUE(gate.copied(50)) << "the second write waited for the first one's copy";
  EXPECT_TRUE(still_running(second)) << "acknowledged before an earlier write of the file";
  std::string out, read_why;
  auto read =
      std::async(std::launch::async, [&] { return store->read("shared", 50, 10, out, read_why); });
  EXPECT_EQ(read.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "a read waited for a copy";
  gate.open();
  EXPECT_EQ(read.get(), Status::NotHeld) << "a read saw bytes not committed";
  ASSERT_EQ(first.get(), Status::Ok) << why_;
  ASSERT_EQ(second.get(), Status::Ok) << why;
  const std::string expected = std::string(50, 'a') + std::string(100, 'b');
  ASSERT_EQ(store->read("shared", 0, 150, out, why_), Status::Ok);
  EXPECT_EQ(out, expected) << "the later write wins";
  store.reset();  // the node dies: its restart reads the same records in the same order
  store = open();
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("shared"), expected);
}

TEST_F(StoreTest, WritesOfOneFileToApartRangesCommitWithoutWaitingForEachOther) {
  auto store = open();
  CopyGate gate(*store, {0, 100});
  std::string why_a, why_b, why_e;
  auto a = std::async(std::launch::async,
                      [&] { return store->write("f", 0, std::string(100, 'a'), "", why_a); });
  EXPECT_TRUE(gate.copied(0));
  auto b = std::async(std::launch::async,
                      [&] { return store->write("f", 100, std::string(100, 'b'), "", why_b); });
  EXPECT_TRUE(gate.copied(100)) << "the second write waited for the first one's copy";
  EXPECT_EQ(logs().size(), 2u) << "writes of apart ranges at once share one segment";
  gate.release(0);
  EXPECT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "a write waited for a later one of another range";
  // Over what the held write placed: after it, whichever segment is idle.
  auto e = std::async(std::launch::async,
                      [&] { return store->write("f", 150, std::string(10, 'e'), "", why_e); });
  EXPECT_TRUE(still_running(e)) << "acknowledged before the earlier write it overlaps";
  gate.open();
  EXPECT_EQ(a.get(), Status::Ok) << why_a;
  EXPECT_EQ(b.get(), Status::Ok) << why_b;
  EXPECT_EQ(e.get(), Status::Ok) << why_e;
  // Over both segments' places: after both.
  ASSERT_EQ(store->write("f", 50, std::string(100, 'c'), "", why_), Status::Ok) << why_;
  std::string expected = std::string(50, 'a') + std::string(100, 'c') + std::string(50, 'b');
  expected.replace(150, 10, std::string(10, 'e'));
  std::string out;
  ASSERT_EQ(store->read("f", 0, 200, out, why_), Status::Ok) << why_;
  EXPECT_EQ(out, expected);
  store.reset();  // the node dies: its restart orders the segments' records the same way
  store = open();
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), expected);
}

namespace {

/// One write of the random-writes tests: its range, and when it began and was acknowledged.
struct TimedWrite {
  std::uint64_t offset = 0, length = 0;
  std::chrono::steady_clock::time_point began, acknowledged;
};

/// Threads writing random ranges of [0, span) of file "f" at once, `each` writes a thread, every
/// write its own number (from 1) in each 4-byte word; the last number, written first, covers
/// the whole span. `beside`, when given, runs on a thread of its own until the writes end (it
/// polls `writing`).
std::vector<TimedWrite> random_writes(Store& store, unsigned threads, unsigned each,
                                      std::uint64_t span,
                                      const std::function<void(std::atomic<bool>&)>& beside = {}) {
  std::vector<TimedWrite> writes(threads * each + 1);
  const auto write = [&](std::uint32_t id) {
    TimedWrite& done = writes[id - 1];
    std::string data(done.length, '\0');
    for (std::uint64_t at = 0; at < done.length; at += 4) std::memcpy(&data[at], &id, 4);
    std::string why;
    done.began = std::chrono::steady_clock::now();
    EXPECT_EQ(store.write("f", done.offset, data, "", why), Status::Ok) << why;
    done.acknowledged = std::chrono::steady_clock::now();
  };
  writes.back().length = span;
  write(static_cast<std::uint32_t>(writes.size()));
  std::atomic<bool> writing{true};
  std::thread aside;
  if (beside) aside = std::thread([&] { beside(writing); });
  std::vector<std::thread> writers;
  for (unsigned t = 0; t < threads; ++t)
    writers.emplace_back([&, t] {
      std::mt19937_64 random(t + 1);
      for (unsigned k = 0; k < each; ++k) {
        const std::uint32_t id = t * each + k + 1;
        TimedWrite& done = writes[id - 1];
        done.length = 4 * (1 + random() % (8 << 10));
        done.offset = 4 * (random() % ((span - done.length) / 4 + 1));
        write(id);
      }
    });
  for (auto& writer : writers) writer.join();
  writing = false;
  if (aside.joinable()) aside.join();
  return writes;
}

/// Words of `bytes` that hold a number no write covering them had, or a write that another
/// one, begun after its acknowledgement, overwrote.
unsigned misplaced_words(const std::vector<TimedWrite>& writes, const std::string& bytes) {
  unsigned wrong = 0;
  for (std::uint64_t word = 0; word + 4 <= bytes.size(); word += 4) {
    std::uint32_t id = 0;
    std::memcpy(&id, &bytes[word], 4);
    const auto covers = [word](const TimedWrite& done) {
      return done.offset <= word && word < done.offset + done.length;
    };
    if (id == 0 || id > writes.size() || !covers(writes[id - 1])) {
      ++wrong;
      continue;
    }
    const TimedWrite& winner = writes[id - 1];
    wrong += std::any_of(writes.begin(), writes.end(), [&](const TimedWrite& other) {
      return covers(other) && other.began > winner.acknowledged;
    });
  }
  return wrong;
}

}  // namespace

TEST_F(StoreTest, WritesOfOneFileAtOnceLeaveEachByteItsLatestWrite) {
  // A write acknowledged before another began must not win over it: not in a read, not in a
  // drain after a restart.
  constexpr std::uint64_t kSpan = 256 << 10;
  auto store = open(64 << 20);
  const auto writes = random_writes(*store, 4, 300, kSpan);
  EXPECT_LE(logs().size(), 4u) << "a file's segments grew past those open at once";
  std::string read;
  ASSERT_EQ(store->read("f", 0, kSpan, read, why_), Status::Ok) << why_;
  store.reset();  // the node dies
  store = open(64 << 20);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  const std::string drained = pfs_file("f");
  ASSERT_EQ(drained.size(), kSpan);
  EXPECT_TRUE(read == drained) << "a read and the drain after a restart disagree";
  EXPECT_EQ(misplaced_words(writes, drained), 0u)
      << "words holding a write that another, begun after it, overwrote";
}

TEST_F(StoreTest, WritesOfOneFileWhileItDrainsLeaveEachByteItsLatestWrite) {
  // Drains of the file, one after another, while the threads write it: each seals the
  // segments and takes them while writes commit into them and open new ones.
  constexpr std::uint64_t kSpan = 256 << 10;
  auto store = open(64 << 20);
  unsigned drains = 0;
  const auto writes = random_writes(*store, 3, 300, kSpan, [&](std::atomic<bool>& writing) {
    for (std::string why; writing; ++drains) EXPECT_EQ(store->drain("f", why), Status::Ok) << why;
  });
  ASSERT_EQ(store->drain("f", why_), Status::Ok) << why_;
  EXPECT_GT(drains, 1u);
  EXPECT_EQ(store->stats().used, 0u);
  const std::string drained = pfs_file("f");
  ASSERT_EQ(drained.size(), kSpan);
  EXPECT_EQ(misplaced_words(writes, drained), 0u)
      << "words holding a write that another, begun after it, overwrote";
}

TEST_F(StoreTest, ADrainWaitsForTheWritesPlacedBeforeIt) {
  auto store = open();
  CopyGate gate(*store, {10});
  ASSERT_EQ(store->write("f", 0, std::string(10, 'a'), "", why_), Status::Ok);
  auto held = std::async(std::launch::async,
                         [&] { return store->write("f", 10, std::string(10, 'b'), "", why_); });
  EXPECT_TRUE(gate.copied(10));
  std::string why;
  auto drain = std::async(std::launch::async, [&] { return store->drain("f", why); });
  EXPECT_TRUE(still_running(drain)) << "the drain left a write placed before it behind";
  gate.open();
  EXPECT_EQ(held.get(), Status::Ok) << why_;
  EXPECT_EQ(drain.get(), Status::Ok) << why;
  EXPECT_EQ(pfs_file("f"), std::string(10, 'a') + std::string(10, 'b'));
  EXPECT_EQ(store->stats().used, 0u);
}

TEST_F(StoreTest, AWriteThatFailsToCopyCostsTheLaterOnesNothing) {
  auto store = open(1 << 20);
  CopyGate gate(*store, {0});
  std::future<Status> failing;
  {
    // The first write cannot grow the log past 64 KiB; the limit is gone for the second.
    const FileSizeLimit limit(64 << 10);
    failing = std::async(std::launch::async, [&] {
      return store->write("f", 0, std::string(100 << 10, 'a'), "", why_);
    });
    EXPECT_TRUE(gate.copied(0));
  }
  std::string why;
  auto later =
      std::async(std::launch::async, [&] { return store->write("f", 200, "later", "", why); });
  EXPECT_TRUE(gate.copied(200));
  gate.open();
  EXPECT_EQ(failing.get(), Status::Error);
  EXPECT_NE(why_.find("device:"), std::string::npos) << why_;
  ASSERT_EQ(later.get(), Status::Ok) << why;
  EXPECT_EQ(store->stats().used, 5u) << "the failed write's room is given back";
  store.reset();  // the node dies: the acknowledged write must survive its restart
  store = open(1 << 20);
  EXPECT_EQ(store->stats().used, 5u) << "the acknowledged write was lost in the restart";
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), std::string(200, '\0') + "later");
}

TEST_F(StoreTest, AFailedCopyClosesEveryOpenSegmentOfItsFile) {
  auto store = open(1 << 20);
  CopyGate gate(*store, {0});
  std::string why_a;
  auto a = std::async(std::launch::async,
                      [&] { return store->write("f", 0, std::string(100, 'a'), "", why_a); });
  EXPECT_TRUE(gate.copied(0));
  // Beside the held write, in a segment of its own; then a write over it that fails.
  ASSERT_EQ(store->write("f", 1000, std::string(100, 'b'), "", why_), Status::Ok) << why_;
  {
    const FileSizeLimit limit(64 << 10);
    EXPECT_EQ(store->write("f", 1000, std::string(100 << 10, 'x'), "", why_), Status::Error);
  }
  gate.open();
  ASSERT_EQ(a.get(), Status::Ok) << why_a;
  // Newer than everything before it, whichever segment is idle.
  ASSERT_EQ(store->write("f", 1000, std::string(10, 'w'), "", why_), Status::Ok) << why_;
  store.reset();  // the node dies
  store = open(1 << 20);
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), std::string(100, 'a') + std::string(900, '\0') + std::string(10, 'w') +
                               std::string(90, 'b'));
}

TEST_F(StoreTest, WithNoDescriptorForANewSegmentAWriteWaitsForARunningCopyInstead) {
  auto store = open();
  CopyGate gate(*store, {0});
  std::string why_a;
  auto a = std::async(std::launch::async,
                      [&] { return store->write("f", 0, std::string(100, 'a'), "", why_a); });
  EXPECT_TRUE(gate.copied(0));
  // Every descriptor number taken: the node cannot open another segment.
  rlimit saved{};
  getrlimit(RLIMIT_NOFILE, &saved);
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::vector<int> taken;
  for (int fd; (fd = dup(0)) >= 0;) taken.push_back(fd);
  std::string why;
  auto b = std::async(std::launch::async,
                      [&] { return store->write("f", 100, std::string(100, 'b'), "", why); });
  EXPECT_TRUE(still_running(b)) << "it did not wait for the running copy";
  gate.open();
  const Status written = b.get();
  for (const int fd : taken) close(fd);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(a.get(), Status::Ok) << why_a;
  ASSERT_EQ(written, Status::Ok) << why;
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("f"), std::string(100, 'a') + std::string(100, 'b'));
}

TEST_F(StoreTest, ADrainedSegmentGivesItsRoomBackToTheDevice) {
  auto store = open(64 << 20);
  const std::string block(1 << 20, 'a');
  for (std::uint64_t at = 0; at < (16ULL << 20); at += block.size())
    ASSERT_EQ(store->write("out", at, block, "job", why_), Status::Ok);
  // Open descriptors of this process that still reach a log on the device, deleted or not:
  // while one does, the kernel keeps the segment's blocks.
  const auto segments_open = [this] {
    int open = 0;
    for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
      std::error_code error;
      const std::string target = fs::read_symlink(entry.path(), error).string();
      if (!error && target.rfind(device().string() + "/", 0) == 0 &&
          target.find(".bblog") != std::string::npos)
        ++open;
    }
    return open;
  };
  ASSERT_GT(segments_open(), 0) << "a held segment is open";
  ASSERT_EQ(store->drain("out", why_), Status::Ok) << why_;
  EXPECT_TRUE(logs().empty()) << "the drained segments are unlinked before the reply";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (segments_open() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(segments_open(), 0) << "a drained segment is still open, its blocks never freed";
  EXPECT_EQ(fs::file_size(pfs() / "out"), 16ULL << 20);
}

TEST(Fences, UncoveredPartsOfARange) {
  using harmonia::storage::fences::Range;
  using harmonia::storage::fences::uncovered;
  const std::vector<Range> fenced{{10, 10}, {30, 5}};
  const auto parts = uncovered(0, 40, fenced);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].offset, 0u);
  EXPECT_EQ(parts[0].length, 10u);
  EXPECT_EQ(parts[1].offset, 20u);
  EXPECT_EQ(parts[1].length, 10u);
  EXPECT_EQ(parts[2].offset, 35u);
  EXPECT_EQ(parts[2].length, 5u);
  EXPECT_TRUE(uncovered(12, 5, fenced).empty());
  EXPECT_EQ(uncovered(40, 8, fenced).size(), 1u);
}

// Identity (docs/security.md): the data is its writer's, and the PFS is opened as its owner.
// Needs root to act as other users; uids 61000 and 61001 need no passwd entry.
TEST_F(StoreTest, AFilesDataIsItsWritersAndThePfsIsOpenedAsItsOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "acting as other users needs root";
  const Caller a{61000, 61000, false}, b{61001, 61001, false}, admin{0, 0, true};
  fs::create_directories(pfs() / "open");
  fs::permissions(pfs() / "open", fs::perms::all);
  auto store = open();
  ASSERT_EQ(store->write("open/a.dat", 0, "secret", "", why_, a), Status::Ok) << why_;
  // The first write made the PFS file, as its writer.
  struct stat st {};
  ASSERT_EQ(stat((pfs() / "open/a.dat").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, a.uid);
  std::string out;
  EXPECT_EQ(store->write("open/a.dat", 0, "B", "", why_, b), Status::Forbidden);
  EXPECT_NE(why_.find("uid 61000"), std::string::npos) << why_;
  EXPECT_EQ(store->read("open/a.dat", 0, 6, out, why_, b), Status::Forbidden);
  EXPECT_TRUE(out.empty()) << "no byte of A's data for B";
  EXPECT_EQ(store->drain("open/a.dat", why_, b), Status::Forbidden);
  EXPECT_EQ(store->drain("", why_, b), Status::Ok) << "B's drain of everything drains B's files";
  EXPECT_EQ(store->stats().used, 6u);
  // The PFS refuses B a file in root's 0755 root: so does the node, and nothing is made.
  EXPECT_EQ(store->write("b.dat", 0, "x", "", why_, b), Status::Forbidden);
  EXPECT_NE(why_.find("as uid 61001"), std::string::npos) << why_;
  EXPECT_FALSE(fs::exists(pfs() / "b.dat"));
  ASSERT_EQ(store->read("open/a.dat", 0, 6, out, why_, admin), Status::Ok);
  EXPECT_EQ(out, "secret");
  ASSERT_EQ(store->read("open/a.dat", 0, 6, out, why_, a), Status::Ok);
  // A restarted node knows whose each log is.
  store.reset();
  store = open();
  EXPECT_EQ(store->read("open/a.dat", 0, 6, out, why_, b), Status::Forbidden);
  ASSERT_EQ(store->drain("", why_, a), Status::Ok) << why_;
  EXPECT_EQ(pfs_file("open/a.dat"), "secret");
  ASSERT_EQ(stat((pfs() / "open/a.dat").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, a.uid) << "drained as its owner";
}

TEST_F(StoreTest, ADrainAcrossFileSystemsWritesEveryRecordInOrderAroundTheFences) {
  // The device in RAM, the PFS on disk: copy_file_range refuses (EXDEV), splice copies.
  const fs::path ram = fs::path("/dev/shm") / ("harmonia-store-" + std::to_string(getpid()));
  struct stat shm {
  }, disk{};
  if (stat("/dev/shm", &shm) != 0 || stat(pfs().c_str(), &disk) != 0 || shm.st_dev == disk.st_dev)
    GTEST_SKIP() << "needs /dev/shm on another file system than " << pfs();
  fs::create_directories(ram);
  {
    Store store(ram, pfs(), 1 << 20);
    ASSERT_EQ(store.write("f", 0, std::string(100, 'A'), "job", why_), Status::Ok);
    ASSERT_EQ(store.write("f", 100, std::string(50, 'C'), "job", why_), Status::Ok);
    ASSERT_EQ(store.write("f", 120, std::string(10, 'D'), "job", why_), Status::Ok);
  }  // the node dies; its client writes [20, 40) through to the PFS, fenced
  std::ofstream(pfs() / "f") << std::string(20, '\0') << std::string(20, 'B');
  fence(pfs(), "f", 20, 20);
  Store store(ram, pfs(), 1 << 20);
  store.set_fence_node("n:1");
  ASSERT_EQ(store.drain("", why_), Status::Ok) << why_;
  fs::remove_all(ram);
  EXPECT_EQ(pfs_file("f"), std::string(20, 'A') + std::string(20, 'B') + std::string(60, 'A') +
                               std::string(20, 'C') + std::string(10, 'D') + std::string(20, 'C'));
}
