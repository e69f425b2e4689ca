#pragma once
/// @file The buffer node's drains and its buffer monitor (docs/buffer-nodes.md). With a scheduler
/// daemon (harmonia-bbd --schedd) the node reports its state every report period and drains the
/// jobs the scheduler names; without one, or while the scheduler is unreachable, it drains on its
/// own once its fill passes the threshold. Logs recovered after a crash always drain.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "bbd/store.hpp"
#include "control/control.pb.h"

namespace harmonia::bbd {

class Monitor {
 public:
  /// `schedd`: the scheduler's address ("" for a standalone node); `advertise`: HOST:PORT where
  /// clients reach this node; `in_flight`: requests being served (the queue depth).
  Monitor(Store& store, std::string schedd, std::string advertise, double threshold,
          const std::atomic<unsigned>& in_flight);
  /// Starts the drain thread and, with a scheduler, the report thread (both detached).
  void start();

 private:
  void drain_loop();
  void report_loop();
  /// One connection's life: registers, then reports until the connection fails (throws).
  void serve_scheduler();
  void apply(const control::DrainOrder& order);

  Store& store_;
  std::string schedd_, advertise_;
  double threshold_;
  const std::atomic<unsigned>& in_flight_;

  std::mutex mutex_;
  bool managed_ = false;  ///< registered with the scheduler now
  control::DrainOrder order_;
  std::uint64_t acted_epoch_ = 0;  ///< the last order fully carried out
};

}  // namespace harmonia::bbd
