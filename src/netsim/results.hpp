#pragma once
/// @file What one run measured, and its JSON form (docs/network-interference.md, "Results").

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "netsim/config.hpp"
#include "netsim/fabric.hpp"
#include "netsim/link_load.hpp"
#include "netsim/placement.hpp"

namespace harmonia::netsim {

struct JobResult {
  long clients = 0;
  long transfers = 0;  ///< completed, warm-up and unrecorded ones included
  double bytes = 0;    ///< of the completed transfers
  /// When the last client completed its warmup + samples transfers (for a finite job: when the
  /// job ended, e.g. the checkpoint time); negative if the run stopped before.
  double quota_time = -1;
  std::vector<double> latencies;  ///< recorded samples, in completion order
};

struct RunResult {
  explicit RunResult(const Fabric& fabric) : loads(fabric) {}
  JobResult mpi, io;
  double end_time = 0;
  std::string stop_reason;  ///< "quota", "max_transfers" or "max_time"
  long transfers_started = 0;
  long packet_drops = 0;  ///< packet model: packets the port queues dropped (0 by design)
  LinkLoad loads;
};

/// The results document. Deterministic: the same configuration gives the same bytes.
nlohmann::ordered_json results_json(const Config& config, const Fabric& fabric,
                                    const Layout& layout, const RunResult& result);

}  // namespace harmonia::netsim
