#pragma once
/// @file The buffer node's drains and its buffer monitor (docs/buffer-nodes.md). With a scheduler
/// daemon (harmonia-bbd --schedd) the node reports its state every report period and drains the
/// jobs the scheduler names; without one, or while the scheduler is unreachable, it drains on its
/// own once its fill passes the threshold. Logs recovered after a crash always drain. The
/// scheduler's orders also name the read phases' files to stage in (DrainOrder.stage_in): a
/// thread of their own copies them into the store and drops the copies no order lists.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bbd/store.hpp"
#include "control/control.pb.h"

namespace harmonia::control {
class Client;
}

namespace harmonia::bbd {

class Monitor {
 public:
  /// `schedd`: the scheduler's address ("" for a standalone node); `advertise`: HOST:PORT where
  /// clients reach this node; `in_flight`: requests being served (the queue depth).
  Monitor(Store& store, std::string schedd, std::string advertise, double threshold,
          const std::atomic<unsigned>& in_flight);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  /// Starts the drain thread and, with a scheduler, the report and stage-in threads (all
  /// detached).
  void start();
  /// Sends a report at once and returns when the scheduler has answered it: the files held now
  /// are the scheduler's to know (a client's close). False, with `why`, when the scheduler is
  /// not connected or does not answer within a few seconds.
  bool publish(std::string& why);

 private:
  void drain_loop();
  void stage_loop();
  /// Carries out one stage-in of the order (every file), unless the order drops it meanwhile.
  void stage(const control::StageIn& stage_in);
  /// Whether the current order lists `stage_in` (as it is: a changed one is another).
  bool ordered(const control::StageIn& stage_in);
  bool ordered_locked(const control::StageIn& stage_in) const;
  void report_loop();
  /// One connection's life: registers, then reports until the connection fails (throws).
  void serve_scheduler();
  /// Until a report is wanted (report_soon) or `every` has passed: the orders the scheduler
  /// pushes meanwhile are applied as they arrive, so an urgent drain starts at once.
  void await_report(control::Client& client, std::chrono::duration<double> every);
  void apply(const control::DrainOrder& order);
  /// Drains the files of the order's urgent list not dealt with yet (those the store does not
  /// hold are done at once); whether it dealt with any.
  bool drain_urgent(const control::DrainOrder& order);
  /// Logs `line`, a drain of `file` that failed, naming its writer's job and user and the node.
  void log_drain_failure(const std::string& line, const FileRef& file);
  /// Wakes the drain and stage-in threads: an order came, or a write.
  void wake();
  /// Asks the report thread for a report now (a publish, an urgent drain done).
  void report_soon();

  Store& store_;
  std::string schedd_, advertise_;
  double threshold_;
  const std::atomic<unsigned>& in_flight_;

  std::mutex mutex_;
  int report_wanted_fd_ = -1;      ///< eventfd: the report thread's wake-up, a report is wanted
  std::condition_variable work_;   ///< the drain and stage-in threads': something may be to do
  std::uint64_t work_events_ = 0;  ///< grows with every wake()
  /// Urgent drains (by id) dealt with, for the next report, and those it reported (until an
  /// order no longer lists them).
  std::set<std::uint64_t> urgent_done_, urgent_reported_;
  std::condition_variable acked_;     ///< a report was answered
  std::uint64_t reports_wanted_ = 0;  ///< reports asked for (report_soon)
  std::uint64_t reports_acked_ = 0;   ///< of those, the last one whose report was answered
  bool managed_ = false;              ///< registered with the scheduler now
  control::DrainOrder order_;
  std::uint64_t acted_epoch_ = 0;  ///< the last order fully carried out
  /// Stage-ins finished, by key (job and phase): the StageIn as ordered, and the files that
  /// failed. Guarded by mutex_.
  struct Staged {
    std::string ordered;  ///< the StageIn, serialized
    std::vector<std::string> failed;
  };
  std::map<std::string, Staged> staged_;
};

}  // namespace harmonia::bbd
