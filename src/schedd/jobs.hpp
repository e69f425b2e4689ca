#pragma once
/// @file The scheduler daemon's one table of jobs: a record per job it has known, numbered in
/// registration order. The number is the job's id in both policy cores (the coordination
/// strategy's and the buffer policy's), which number jobs the same way, so no map between ids is
/// kept. `Service` writes who the job is and its processes; `BufferBroker` writes how the job's
/// phases map onto the buffer policy core's. Phase progress (grants, completions, drains) is the
/// policy core's alone. An ended job's record stays, without its processes: its data may still
/// be on the buffer nodes, and the records and accounting name it. Pure data: no I/O, no threads.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace harmonia::schedd {

using ConnectionId = std::uint64_t;
/// A job's number in the table, and its id in the policy cores.
using JobNumber = int;

/// How a job's phases map onto the buffer policy core's (BufferBroker): the daemon numbers a
/// job's phases, and hands one to the core only once the core has started the job.
struct BufferPhases {
  bool open = false;          ///< in a buffer phase (a read with nothing announced is none)
  int phase_index = -1;       ///< the current (or last) phase's index in the policy core
  int next_index = 0;         ///< the index the next phase (or announced read) takes
  bool phase_read = false;    ///< the current phase is the announced read phase
  int announced_read = -1;    ///< the announced read phase's index, until it begins
  double phase_bytes = 0;     ///< what the current phase asks the core for
  std::set<int> ended_early;  ///< phases that ended before their grant: completed when granted
  std::set<std::size_t> announced;  ///< a hash of each file list the job announced
};

/// What a live job has: its processes and what they are doing. Gone once it ends.
struct LiveJob {
  std::unordered_set<ConnectionId> processes;
  std::uint32_t in_phase = 0;     ///< processes in an I/O phase
  std::uint32_t wants_flush = 0;  ///< processes waiting to flush
  std::uint64_t phases = 0;       ///< I/O phases its processes began
  std::uint64_t epoch = 0;        ///< its directive's, bumped at each push
};

struct JobRecord {
  // Who it is, fixed at registration.
  std::string key;    ///< the daemon's, "UID/KEY": unique among live jobs; tags its node data
  std::string label;  ///< the key as its processes and its user name it
  std::string named;  ///< the name its processes gave, when not its label
  uid_t uid = 0;
  std::uint32_t ranks = 1;
  std::int32_t priority = 0;
  double registered_at = 0;
  std::unique_ptr<LiveJob> live;  ///< null once it ended
  BufferPhases buffer;

  bool ended() const { return !live; }
  const std::string& name() const { return named.empty() ? label : named; }
};

class JobTable {
 public:
  /// `keeps_ended`: an ended job keeps who it was (its key names it, its label and name stay),
  /// for the buffer policy's records and the nodes' reports; without buffer nodes nothing asks,
  /// and only its number's place is kept.
  explicit JobTable(bool keeps_ended = true) : keeps_ended_(keeps_ended) {}
  /// Adds a job, live; its number. Its key then names it (see latest).
  JobNumber add(JobRecord record);
  JobRecord& at(JobNumber job) { return records_.at(static_cast<std::size_t>(job)); }
  const JobRecord& at(JobNumber job) const { return records_.at(static_cast<std::size_t>(job)); }
  /// The live job with the daemon's `key`, if any.
  std::optional<JobNumber> live(const std::string& key) const;
  /// The latest job with the daemon's `key`, live or ended: whose data a node's report names.
  std::optional<JobNumber> latest(const std::string& key) const;
  /// The job's last process left: it ends, and keeps its record without them (and, unless the
  /// table keeps ended jobs, without its key, label and name).
  void end(JobNumber job);
  /// The live jobs, in the order of their keys.
  std::vector<JobNumber> live_by_key() const;
  std::size_t live_count() const { return live_.size(); }
  /// Every job ever added, live or ended.
  std::size_t size() const { return records_.size(); }

 private:
  std::deque<JobRecord> records_;  // grows without copying the records, nor twice their size
  // By key: views of the records' own keys (a record never moves, nor changes its key).
  std::unordered_map<std::string_view, JobNumber> latest_;  ///< every key a job had
  std::map<std::string_view, JobNumber> live_;              ///< the live jobs, by key
  bool keeps_ended_;
};

}  // namespace harmonia::schedd
