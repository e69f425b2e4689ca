// Stage-in on a buffer node's store (docs/buffer-nodes.md, "Stage-in (read phases)"): a copy
// holds exactly this node's stripes of the PFS file, is made as the job's user beneath the root
// with no link followed, only of a file settled for 1 s and unchanged while copied, is served
// only to its user and only while the reader sees the same file, is charged to the capacity but
// never held nor drained, and goes when dropped, when the file is written, or at a restart.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "bbd/requests.hpp"
#include "bbd/store.hpp"

using namespace harmonia::bbd;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kStripe = 4096;

/// The PFS files every test reads, made once and left to settle (a copy is made only of a file
/// whose ctime is at least 1 s old); each test has files of its own.
fs::path shared_pfs;

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(random());
  return out;
}

void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

FileIdentity identity(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return {static_cast<std::uint64_t>(st.st_size),
          st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec,
          static_cast<std::uint64_t>(st.st_ino)};
}

/// 10 stripes and a bit: the last stripe is short.
const std::string& striped() {
  static const std::string bytes = random_bytes(10 * kStripe + 123, 7);
  return bytes;
}

class StageInTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared_pfs = fs::temp_directory_path() / ("harmonia-stage-in-" + std::to_string(getpid()));
    fs::remove_all(shared_pfs);
    for (const char* name :
         {"striped.dat", "rewrite.dat", "grow.dat", "touch.dat", "replace.dat", "drop.dat",
          "keep.dat", "written.dat", "drained.dat", "mine.dat", "room.dat", "restart.dat",
          "during-write.dat", "during-change.dat", "requests.dat", "real/inside.dat"})
      put(shared_pfs / name, striped());
    put(shared_pfs / "secret.dat", "only root reads this");
    chmod((shared_pfs / "secret.dat").c_str(), 0600);
    fs::create_directory_symlink("real", shared_pfs / "link");
    fs::create_symlink("striped.dat", shared_pfs / "alias.dat");
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  static void TearDownTestSuite() { fs::remove_all(shared_pfs); }

  void SetUp() override {
    devices_ = shared_pfs.parent_path() /
               ("harmonia-stage-in-dev-" + std::to_string(getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(devices_);
  }
  void TearDown() override { fs::remove_all(devices_); }

  fs::path device(unsigned node = 0) const { return devices_ / std::to_string(node); }
  std::unique_ptr<Store> open(unsigned node = 0, std::uint64_t capacity = 1 << 20) {
    fs::create_directories(device(node));
    return std::make_unique<Store>(device(node), shared_pfs, capacity);
  }
  static StageSpec spec(std::uint32_t index = 0, std::uint32_t count = 1,
                        const std::string& key = "job\n0") {
    return {key, geteuid(), getegid(), kStripe, index, count};
  }
  Status stage(Store& store, const std::string& file, const StageSpec& how = spec()) {
    bytes_ = 0;
    return store.stage_in(
        how, file, [] { return true; }, bytes_, why_);
  }
  /// The copies' files on the device of `node`.
  std::vector<fs::path> copies(unsigned node = 0) const {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(device(node) / "stage-in"))
      out.push_back(entry.path());
    return out;
  }
  Status read(Store& store, const std::string& file, std::uint64_t offset, std::uint64_t length,
              const FileIdentity& as_seen, const Caller& caller = Caller::node()) {
    out_.clear();
    return store.read_staged(file, offset, length, as_seen, out_, why_, caller);
  }

  fs::path devices_;
  std::uint64_t bytes_ = 0;
  std::string why_, out_;
};

}  // namespace

TEST_F(StageInTest, ACopyHoldsExactlyThisNodesStripesByteForByte) {
  const auto seen = identity(shared_pfs / "striped.dat");
  for (std::uint32_t node = 0; node < 3; ++node) {
    auto store = open(node);
    ASSERT_EQ(stage(*store, "striped.dat", spec(node, 3)), Status::Ok) << why_;
    // The copy on the device: this node's stripes one after the other, nothing else.
    std::string expected;
    for (std::uint64_t k = node; k * kStripe < striped().size(); k += 3)
      expected += striped().substr(k * kStripe, kStripe);
    EXPECT_EQ(bytes_, expected.size());
    ASSERT_EQ(copies(node).size(), 1u);
    EXPECT_EQ(contents(copies(node).front()), expected);
    EXPECT_EQ(store->stats().staged, expected.size());
    // Served: each of its stripes, and a piece within one; refused: the others' stripes.
    for (std::uint64_t k = 0; k * kStripe < striped().size(); ++k) {
      const std::uint64_t length = std::min(kStripe, striped().size() - k * kStripe);
      if (k % 3 == node) {
        ASSERT_EQ(read(*store, "striped.dat", k * kStripe, length, seen), Status::Ok) << k;
        EXPECT_EQ(out_, striped().substr(k * kStripe, length)) << k;
        ASSERT_EQ(read(*store, "striped.dat", k * kStripe + 100, 20, seen), Status::Ok) << k;
        EXPECT_EQ(out_, striped().substr(k * kStripe + 100, 20)) << k;
      } else {
        EXPECT_EQ(read(*store, "striped.dat", k * kStripe, length, seen), Status::NotHeld) << k;
        EXPECT_TRUE(out_.empty());
      }
    }
    // A range into the next node's stripe, or past the end of the file: not this node's.
    EXPECT_EQ(read(*store, "striped.dat", node * kStripe + kStripe - 10, 20, seen),
              Status::NotHeld);
    const std::uint64_t last = 10 * kStripe;  // stripe 10, node 1's, 123 bytes
    EXPECT_EQ(read(*store, "striped.dat", last, 124, seen), Status::NotHeld);
  }
  // One node of one: every range of the file, across stripes.
  auto whole = open(3);
  ASSERT_EQ(stage(*whole, "striped.dat"), Status::Ok) << why_;
  ASSERT_EQ(read(*whole, "striped.dat", 1000, 5 * kStripe, seen), Status::Ok);
  EXPECT_EQ(out_, striped().substr(1000, 5 * kStripe));
  EXPECT_EQ(read(*whole, "striped.dat", 0, striped().size() + 1, seen), Status::NotHeld);
}

TEST_F(StageInTest, AReaderWhoSeesAnotherFileGetsNotHeld) {
  auto store = open();
  for (const char* name : {"rewrite.dat", "grow.dat", "touch.dat", "replace.dat"})
    ASSERT_EQ(stage(*store, name), Status::Ok) << why_;
  const auto before = identity(shared_pfs / "rewrite.dat");
  ASSERT_EQ(read(*store, "rewrite.dat", 0, 100, before), Status::Ok);
  // Rewritten in place, same size: mtime and ctime move.
  {
    std::fstream f(shared_pfs / "rewrite.dat", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f << "new";
  }
  EXPECT_EQ(read(*store, "rewrite.dat", 0, 100, identity(shared_pfs / "rewrite.dat")),
            Status::NotHeld);
  // Grown.
  std::ofstream(shared_pfs / "grow.dat", std::ios::binary | std::ios::app) << "more";
  EXPECT_EQ(read(*store, "grow.dat", 0, 100, identity(shared_pfs / "grow.dat")), Status::NotHeld);
  // Touched: the same bytes, but the node cannot know.
  ASSERT_EQ(utimensat(AT_FDCWD, (shared_pfs / "touch.dat").c_str(), nullptr, 0), 0);
  EXPECT_EQ(read(*store, "touch.dat", 0, 100, identity(shared_pfs / "touch.dat")), Status::NotHeld);
  // Replaced by another file with the same times (another inode).
  const auto old = identity(shared_pfs / "replace.dat");
  FileIdentity other = old;
  ++other.inode;
  EXPECT_EQ(read(*store, "replace.dat", 0, 100, other), Status::NotHeld);
  EXPECT_EQ(read(*store, "replace.dat", 0, 100, old), Status::Ok);
}

TEST_F(StageInTest, AFileChangedLessThanASecondBeforeTheCopyFails) {
  auto store = open();
  put(shared_pfs / "fresh.dat", striped());
  EXPECT_EQ(stage(*store, "fresh.dat"), Status::Error);
  EXPECT_NE(why_.find("less than 1 s"), std::string::npos) << why_;
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(store->stats().used, 0u);
  EXPECT_EQ(read(*store, "fresh.dat", 0, 10, identity(shared_pfs / "fresh.dat")), Status::NotHeld);
}

TEST_F(StageInTest, AFileTheUserMayNotReadFailsWithNoCopy) {
  if (geteuid() != 0) GTEST_SKIP() << "acting as another user (nobody) needs root";
  auto store = open();
  const StageSpec nobody{"job\n0", 65534, 65534, kStripe, 0, 1};
  EXPECT_EQ(store->stage_in(
                nobody, "secret.dat", [] { return true; }, bytes_, why_),
            Status::Forbidden);
  EXPECT_NE(why_.find("uid 65534"), std::string::npos) << why_;
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(store->stats().used, 0u);
  // As its owner it copies.
  ASSERT_EQ(stage(*store, "secret.dat"), Status::Ok) << why_;
  EXPECT_EQ(copies().size(), 1u);
}

TEST_F(StageInTest, ASymbolicLinkOnTheWayFails) {
  auto store = open();
  EXPECT_EQ(stage(*store, "link/inside.dat"), Status::Invalid);
  EXPECT_EQ(stage(*store, "alias.dat"), Status::Invalid);
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(store->stats().used, 0u);
  EXPECT_EQ(stage(*store, "real/inside.dat"), Status::Ok) << why_;
  // Missing, not regular, bad names, no such stripe: failed, nothing held.
  EXPECT_NE(stage(*store, "missing.dat"), Status::Ok);
  EXPECT_NE(stage(*store, "real"), Status::Ok);
  EXPECT_NE(stage(*store, "../etc/passwd"), Status::Ok);
  EXPECT_NE(stage(*store, ".harmonia/fences/x"), Status::Ok);
  EXPECT_NE(stage(*store, "drop.dat", spec(3, 3)), Status::Ok);
  EXPECT_EQ(copies().size(), 1u);
  EXPECT_EQ(store->stats().used, striped().size());
}

TEST_F(StageInTest, AStageInDroppedFreesItsSpace) {
  auto store = open();
  ASSERT_EQ(stage(*store, "drop.dat", spec(0, 1, "a\n1")), Status::Ok) << why_;
  ASSERT_EQ(stage(*store, "keep.dat", spec(0, 1, "b\n1")), Status::Ok) << why_;
  EXPECT_EQ(store->stats().used, 2 * striped().size());
  EXPECT_EQ(copies().size(), 2u);
  store->drop_stage_in("a\n1");
  const auto after = store->stats();
  EXPECT_EQ(after.used, striped().size());
  EXPECT_EQ(after.staged, striped().size());
  EXPECT_EQ(after.staged_by_key.count("a\n1"), 0u);
  EXPECT_EQ(after.staged_by_key.at("b\n1").at("keep.dat"), striped().size());
  EXPECT_EQ(copies().size(), 1u);
  EXPECT_EQ(read(*store, "drop.dat", 0, 10, identity(shared_pfs / "drop.dat")), Status::NotHeld);
  EXPECT_EQ(read(*store, "keep.dat", 0, 10, identity(shared_pfs / "keep.dat")), Status::Ok);
}

TEST_F(StageInTest, ACopyIsNeverHeldNorDrained) {
  auto store = open();
  const auto before = identity(shared_pfs / "drained.dat");
  ASSERT_EQ(stage(*store, "drained.dat"), Status::Ok) << why_;
  std::string file;
  EXPECT_EQ(store->drain_next({"job", ""}, file, why_), Status::NotHeld);
  EXPECT_TRUE(store->stats().held_by_job.empty());
  ASSERT_EQ(store->write("out.dat", 0, "written", "job", why_), Status::Ok) << why_;
  auto stats = store->stats();
  EXPECT_EQ(stats.used, striped().size() + 7);
  EXPECT_EQ(stats.held_by_job, (std::map<std::string, std::uint64_t>{{"job", 7}}));
  EXPECT_EQ(store->held(), (std::map<std::string, std::uint64_t>{{"out.dat", 7}}));
  ASSERT_EQ(store->drain("", why_), Status::Ok) << why_;
  EXPECT_EQ(store->drain_next({"job", ""}, file, why_), Status::NotHeld);
  stats = store->stats();
  EXPECT_EQ(stats.used, striped().size());
  EXPECT_TRUE(stats.held_by_job.empty());
  EXPECT_EQ(stats.drained, 7u);
  // The PFS file untouched, the copy still served.
  EXPECT_EQ(identity(shared_pfs / "drained.dat"), before);
  EXPECT_EQ(read(*store, "drained.dat", 0, 10, before), Status::Ok);
}

TEST_F(StageInTest, OnlyTheUserTheCopyWasMadeForReadsIt) {
  auto store = open();
  const auto seen = identity(shared_pfs / "mine.dat");
  ASSERT_EQ(stage(*store, "mine.dat"), Status::Ok) << why_;
  const Caller owner{geteuid(), getegid(), false};
  const Caller other{geteuid() + 1, getegid(), false};
  const Caller admin{geteuid() + 1, getegid(), true};
  EXPECT_EQ(read(*store, "mine.dat", 0, 10, seen, other), Status::NotHeld);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(read(*store, "mine.dat", 0, 10, seen, owner), Status::Ok);
  EXPECT_EQ(read(*store, "mine.dat", 0, 10, seen, admin), Status::Ok);
}

TEST_F(StageInTest, AWriteOfTheFileDropsItsCopyAndWrittenDataWins) {
  auto store = open();
  const auto seen = identity(shared_pfs / "written.dat");
  ASSERT_EQ(stage(*store, "written.dat"), Status::Ok) << why_;
  ASSERT_EQ(store->write("written.dat", 0, "abc", "job", why_), Status::Ok) << why_;
  EXPECT_EQ(store->stats().used, 3u);
  EXPECT_EQ(store->stats().staged, 0u);
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(read(*store, "written.dat", 0, 10, seen), Status::NotHeld);
  // A copy made while the node holds written data of the file is not served either.
  ASSERT_EQ(stage(*store, "written.dat"), Status::Ok) << why_;
  EXPECT_EQ(read(*store, "written.dat", 0, 10, seen), Status::NotHeld);
  EXPECT_NE(why_.find("written on this node"), std::string::npos) << why_;
}

TEST_F(StageInTest, AWriteWhileTheFileIsCopiedDropsTheCopy) {
  auto store = open();
  const auto write_once = [&](const std::string& file) {
    return [&store, file, wrote = false]() mutable {
      if (!wrote) {
        std::string why;
        EXPECT_EQ(store->write(file, 0, "x", "job", why), Status::Ok) << why;
        wrote = true;
      }
      return true;
    };
  };
  // A write of another file meanwhile changes nothing.
  ASSERT_EQ(store->stage_in(spec(), "keep.dat", write_once("other.dat"), bytes_, why_), Status::Ok)
      << why_;
  EXPECT_EQ(
      store->stage_in(spec(), "during-write.dat", write_once("during-write.dat"), bytes_, why_),
      Status::Error);
  EXPECT_NE(why_.find("written on this node while it was copied"), std::string::npos) << why_;
  EXPECT_EQ(copies().size(), 1u);
  EXPECT_EQ(store->stats().staged, striped().size());
  EXPECT_EQ(store->stats().used, striped().size() + 2);
}

TEST_F(StageInTest, AFileChangedWhileCopiedFails) {
  auto store = open();
  bool changed = false;
  const auto change_once = [&] {
    if (!changed) {
      std::ofstream(shared_pfs / "during-change.dat", std::ios::binary | std::ios::app) << "x";
      changed = true;
    }
    return true;
  };
  EXPECT_EQ(store->stage_in(spec(), "during-change.dat", change_once, bytes_, why_), Status::Error);
  EXPECT_NE(why_.find("changed while it was copied"), std::string::npos) << why_;
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(store->stats().used, 0u);
  // Abandoned midway (the order dropped it): nothing kept either.
  EXPECT_EQ(store->stage_in(
                spec(), "keep.dat", [] { return false; }, bytes_, why_),
            Status::Error);
  EXPECT_TRUE(copies().empty());
  EXPECT_EQ(store->stats().used, 0u);
}

TEST_F(StageInTest, NoRoomFailsTheFileAndCopiesTakeRoomFromWrites) {
  auto store = open(0, striped().size() + 100);
  ASSERT_EQ(stage(*store, "room.dat"), Status::Ok) << why_;
  EXPECT_EQ(stage(*store, "keep.dat", spec(0, 1, "b\n1")), Status::Full);
  EXPECT_NE(why_.find("no room"), std::string::npos) << why_;
  EXPECT_EQ(store->write("out.dat", 0, std::string(101, 'w'), "job", why_), Status::Full);
  EXPECT_EQ(store->write("out.dat", 0, std::string(100, 'w'), "job", why_), Status::Ok) << why_;
  EXPECT_EQ(copies().size(), 1u);
  // One node's stripes of two fit in the room the drop frees.
  store->drop_stage_in("job\n0");
  ASSERT_EQ(stage(*store, "keep.dat", spec(1, 2)), Status::Ok) << why_;
  EXPECT_EQ(bytes_, 5 * kStripe);
}

TEST_F(StageInTest, ARestartDropsTheCopiesAndKeepsTheWrittenData) {
  {
    auto store = open();
    ASSERT_EQ(stage(*store, "restart.dat"), Status::Ok) << why_;
    ASSERT_EQ(store->write("out.dat", 0, "kept", "job", why_), Status::Ok) << why_;
  }
  auto store = open();
  EXPECT_TRUE(copies().empty());
  const auto stats = store->stats();
  EXPECT_EQ(stats.used, 4u);
  EXPECT_EQ(stats.staged, 0u);
  EXPECT_EQ(read(*store, "restart.dat", 0, 10, identity(shared_pfs / "restart.dat")),
            Status::NotHeld);
  std::string out;
  EXPECT_EQ(store->read("out.dat", 0, 4, out, why_), Status::Ok);
  EXPECT_EQ(out, "kept");
}

TEST_F(StageInTest, AReadRequestWithIdentityIsServedFromTheCopyToItsUserOnly) {
  auto store = open();
  ASSERT_EQ(stage(*store, "requests.dat"), Status::Ok) << why_;
  const auto seen = identity(shared_pfs / "requests.dat");
  const auto read_request = [&](Session& session, bool with_identity) {
    harmonia::bb::Request request;
    request.set_seq(1);
    auto* read = request.mutable_read();
    read->set_file("requests.dat");
    read->set_offset(kStripe);
    read->set_length(10);
    if (with_identity) {
      read->mutable_identity()->set_size(seen.size);
      read->mutable_identity()->set_mtime_ns(seen.mtime_ns);
      read->mutable_identity()->set_ctime_ns(seen.ctime_ns);
      read->mutable_identity()->set_inode(seen.inode);
    }
    return answer(*store, Access{}, session, request.SerializeAsString());
  };
  Session node{harmonia::common::Identity{geteuid(), getegid()}};  // the node's own user
  auto response = read_request(node, true);
  EXPECT_EQ(response.code(), harmonia::bb::Response::OK) << response.message();
  EXPECT_EQ(response.data(), striped().substr(kStripe, 10));
  // Without identity: written data only, and the node holds none.
  EXPECT_EQ(read_request(node, false).code(), harmonia::bb::Response::NOT_HELD);
  // Another user, authenticated: not the copy's.
  Session other{harmonia::common::Identity{geteuid() + 1, getegid()}};
  response = read_request(other, true);
  EXPECT_EQ(response.code(), harmonia::bb::Response::NOT_HELD);
  EXPECT_TRUE(response.data().empty());
  Session owner{harmonia::common::Identity{geteuid(), getegid()}};
  EXPECT_EQ(read_request(owner, true).code(), harmonia::bb::Response::OK);
}
