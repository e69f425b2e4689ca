#pragma once
/// @file One accounting record per job, the columns an admin knows from Slurm's `sacct` plus
/// Harmonia's I/O and its charge (core/pricing.hpp). Built from a scheduler's state at one
/// instant; src/common/accounting.hpp writes the records as JSON and CSV (docs/accounting.md).

#include <string>
#include <vector>

#include "core/pricing.hpp"
#include "core/scheduler.hpp"

namespace harmonia::core {

struct AccountingRecord {
  // sacct's columns. Times are seconds on the host's clock (the simulated time, or the daemon's
  // Unix time); a time not reached yet is negative (sacct prints "Unknown").
  std::string job_id;
  std::string job_name;
  std::string user;
  std::string account;
  std::string qos;
  double submit = 0;
  double start = -1;
  double end = -1;
  double elapsed = 0;  ///< start to end (or to now while it runs), seconds
  std::string state;   ///< PENDING, RUNNING or COMPLETED
  int nnodes = 1;
  int ncpus = 1;
  // Harmonia's: completed phases only.
  double bytes_written = 0;  ///< through the buffers
  double bytes_read = 0;
  double io_time = 0;     ///< seconds its phases did I/O (grant to end)
  double stall_time = 0;  ///< queue wait, phase waits and the I/O time interference added
  double slowdown = 1;    ///< (phase waits + I/O) / I/O alone
  double promised_slowdown = 1;
  double billed_node_hours = 0;
  double refunded_seconds = 0;
  double usage_factor = 1;
  double charge = 0;
  bool bound_broken = false;
};

/// The record of every application `scheduler` knows, at `now` (on the scheduler's clock; add
/// `clock_origin` to each time for the host's). JobID is the application's index plus one, its
/// account its user, its NCPUS its node count: hosts that know better overwrite them.
std::vector<AccountingRecord> accounting_records(const Scheduler& scheduler,
                                                 const PricingConfig& pricing, double now,
                                                 double clock_origin = 0);

/// sacct's Elapsed: [D-]HH:MM:SS.
std::string format_elapsed(double seconds);

}  // namespace harmonia::core
