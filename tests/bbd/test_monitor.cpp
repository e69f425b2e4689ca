// The buffer monitor's stage-ins against a scheduler stand-in on a Unix socket: the node copies
// what its DrainOrder lists, reports the stage-ins it finished (bytes, failed files) while the
// order lists them, drops the copies the order no longer lists, keeps reporting its drains'
// order_epoch, and reports a file whose copy a write dropped as failed.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bbd/monitor.hpp"
#include "bbd/store.hpp"
#include "common/frames.hpp"
#include "common/unix_socket.hpp"
#include "control/control.pb.h"
#include "control/frame.hpp"

using namespace harmonia::bbd;
namespace control = harmonia::control;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kStripe = 4096;

/// Answers one node as harmonia-schedd would: registers it with a short report period and
/// answers every report with the order the test set; keeps every report.
class SchedulerStandIn {
 public:
  explicit SchedulerStandIn(const fs::path& socket)
      : listener_(harmonia::common::listen_unix(socket, "test scheduler", "test", 0600)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~SchedulerStandIn() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  void order(const control::DrainOrder& order) {
    std::lock_guard lock(mutex_);
    order_ = order;
  }
  /// The first report from now on that `wanted` accepts, within 10 s (else a failure).
  control::BufferReport wait_for(const std::function<bool(const control::BufferReport&)>& wanted) {
    std::size_t seen = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    {
      std::lock_guard lock(mutex_);
      seen = reports_.size();
    }
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard lock(mutex_);
        for (; seen < reports_.size(); ++seen)
          if (wanted(reports_[seen])) return reports_[seen];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "no such report within 10 s";
    return {};
  }

 private:
  void serve() {
    int fd = -1;
    while (!stop_) {
      pollfd wait{fd < 0 ? listener_ : fd, POLLIN, 0};
      if (poll(&wait, 1, 50) <= 0) continue;
      if (fd < 0) {
        fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        continue;
      }
      std::uint8_t header[control::kHeaderBytes];
      if (!harmonia::common::receive_all(fd, reinterpret_cast<char*>(header), sizeof(header)))
        break;
      std::string body(control::frame_length(header), '\0');
      control::Envelope in;
      if (!harmonia::common::receive_all(fd, body.data(), body.size()) || !in.ParseFromString(body))
        break;
      control::Envelope out;
      out.set_seq(in.seq());
      {
        std::lock_guard lock(mutex_);
        if (in.has_register_buffer()) {
          out.mutable_buffer_registered()->set_report_seconds(0.02);
          *out.mutable_buffer_registered()->mutable_order() = order_;
        } else {
          reports_.push_back(in.buffer_report());
          *out.mutable_drain_order() = order_;
        }
      }
      std::string frame;
      harmonia::common::append_frame(frame, out);
      if (!harmonia::common::send_all(fd, frame)) break;
    }
    if (fd >= 0) close(fd);
  }

  int listener_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  control::DrainOrder order_;
  std::vector<control::BufferReport> reports_;
  std::thread thread_;
};

class MonitorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pfs_ = fs::temp_directory_path() / ("harmonia-monitor-" + std::to_string(getpid()));
    fs::remove_all(pfs_);
    fs::create_directories(pfs_);
    std::ofstream(pfs_ / "a.dat", std::ios::binary) << std::string(5 * kStripe + 10, 'a');
    std::ofstream(pfs_ / "b.dat", std::ios::binary) << std::string(kStripe, 'b');
    // Copies are made only of files settled for a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  static void TearDownTestSuite() { fs::remove_all(pfs_); }

  void SetUp() override {
    dir_ = pfs_.parent_path() / ("harmonia-monitor-" + std::to_string(getpid()) + "-" +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "dev");
    scheduler_ = std::make_unique<SchedulerStandIn>(dir_ / "schedd.sock");
    // The monitor's threads run for the life of the process, as in harmonia-bbd: the store and
    // the monitor are never destroyed.
    store_ = new Store(dir_ / "dev", pfs_, 1 << 20);
    static const std::atomic<unsigned> in_flight{0};
    monitor_ = new Monitor(*store_, (dir_ / "schedd.sock").string(), "node:1", 1.0, in_flight);
  }
  void TearDown() override {
    scheduler_.reset();
    fs::remove_all(dir_);
  }

  static control::StageIn stage_in(const std::string& job, std::vector<std::string> files) {
    control::StageIn s;
    s.set_job(job);
    s.set_phase(0);
    s.set_uid(geteuid());
    s.set_gid(getegid());
    for (const auto& file : files) s.add_files(file);
    s.set_stripe_bytes(kStripe);
    s.set_stripe_index(1);
    s.set_stripe_count(2);
    return s;
  }
  std::size_t copies() const {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(dir_ / "dev" / "stage-in"), {}));
  }

  static fs::path pfs_;
  fs::path dir_;
  std::unique_ptr<SchedulerStandIn> scheduler_;
  Store* store_ = nullptr;
  Monitor* monitor_ = nullptr;
};

fs::path MonitorTest::pfs_;

/// This node's stripes of a.dat: 1, 3 and 5 (the last, 10 bytes) of 0..5.
constexpr std::uint64_t kMineOfA = 2 * kStripe + 10;

}  // namespace

TEST_F(MonitorTest, AFinishedStageInIsReportedWhileOrderedAndItsSpaceFreedOnceDropped) {
  control::DrainOrder order;
  order.set_epoch(3);
  *order.add_stage_in() = stage_in("A", {"a.dat", "missing.dat", "a.dat"});
  *order.add_stage_in() = stage_in("B", {"b.dat"});  // stripe 1 of a one-stripe file: no bytes
  scheduler_->order(order);
  monitor_->start();
  auto report =
      scheduler_->wait_for([](const control::BufferReport& r) { return r.staged_in_size() == 2; });
  ASSERT_EQ(report.staged_in_size(), 2);
  EXPECT_EQ(report.staged_in(0).job(), "A");
  EXPECT_EQ(report.staged_in(0).bytes(), kMineOfA);
  ASSERT_EQ(report.staged_in(0).failed_size(), 1);
  EXPECT_EQ(report.staged_in(0).failed(0), "missing.dat");
  EXPECT_EQ(report.staged_in(1).job(), "B");
  EXPECT_EQ(report.staged_in(1).bytes(), 0u);
  EXPECT_EQ(report.staged_in(1).failed_size(), 0);
  // Charged to the capacity, not held; the drain part of the order is carried out as before.
  EXPECT_EQ(report.used(), kMineOfA);
  EXPECT_EQ(report.held_size(), 0);
  EXPECT_EQ(report.order_epoch(), 3u);
  EXPECT_EQ(copies(), 2u);
  // Still listed, report after report, while the order lists it.
  report = scheduler_->wait_for([](const control::BufferReport&) { return true; });
  EXPECT_EQ(report.staged_in_size(), 2);

  // A drops out of the order: its copy goes, B stays.
  control::DrainOrder next;
  next.set_epoch(4);
  *next.add_stage_in() = stage_in("B", {"b.dat"});
  scheduler_->order(next);
  report = scheduler_->wait_for(
      [](const control::BufferReport& r) { return r.order_epoch() == 4 && r.used() == 0; });
  ASSERT_EQ(report.staged_in_size(), 1);
  EXPECT_EQ(report.staged_in(0).job(), "B");
  EXPECT_EQ(copies(), 1u);
  EXPECT_EQ(store_->stats().staged, 0u);
}

TEST_F(MonitorTest, AFileWhoseCopyAWriteDroppedIsReportedFailed) {
  control::DrainOrder order;
  order.set_epoch(1);
  *order.add_stage_in() = stage_in("A", {"a.dat"});
  scheduler_->order(order);
  monitor_->start();
  auto report =
      scheduler_->wait_for([](const control::BufferReport& r) { return r.staged_in_size() == 1; });
  ASSERT_EQ(report.staged_in_size(), 1);
  EXPECT_EQ(report.staged_in(0).bytes(), kMineOfA);
  EXPECT_EQ(report.staged_in(0).failed_size(), 0);
  std::string why;
  ASSERT_EQ(store_->write("a.dat", 0, "x", "A", why), Status::Ok) << why;
  report = scheduler_->wait_for([](const control::BufferReport& r) {
    return r.staged_in_size() == 1 && r.staged_in(0).failed_size() == 1;
  });
  ASSERT_EQ(report.staged_in_size(), 1);
  ASSERT_EQ(report.staged_in(0).failed_size(), 1);
  EXPECT_EQ(report.staged_in(0).failed(0), "a.dat");
  EXPECT_EQ(report.staged_in(0).bytes(), 0u);
  EXPECT_EQ(report.used(), 1u);
  ASSERT_EQ(report.held_size(), 1);
  EXPECT_EQ(report.held(0).bytes(), 1u);
}

TEST_F(MonitorTest, AChangedStageInIsCopiedAgain) {
  control::DrainOrder order;
  order.set_epoch(1);
  *order.add_stage_in() = stage_in("A", {"a.dat"});
  scheduler_->order(order);
  monitor_->start();
  scheduler_->wait_for([](const control::BufferReport& r) { return r.staged_in_size() == 1; });
  // The same job and phase, now the node's place is 0 of 1: the whole file.
  order.set_epoch(2);
  order.mutable_stage_in(0)->set_stripe_index(0);
  order.mutable_stage_in(0)->set_stripe_count(1);
  scheduler_->order(order);
  const auto report = scheduler_->wait_for([](const control::BufferReport& r) {
    return r.staged_in_size() == 1 && r.staged_in(0).bytes() == 5 * kStripe + 10;
  });
  EXPECT_EQ(report.used(), 5 * kStripe + 10);
  EXPECT_EQ(copies(), 1u);
}
