#pragma once
/// @file The scheduler daemon's state machine: the job registry, the processes of each job (one
/// connection each), their phases and flush requests, leases, and the directives the policy core
/// decides. No sockets and no threads: the server (server.hpp) feeds it decoded requests and
/// sends what it returns; tests and the fuzzer drive it directly. See docs/control.md.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/identity.hpp"
#include "control/control.pb.h"
#include "core/coordination/coordinator.hpp"
#include "schedd/buffers.hpp"
#include "schedd/held_files.hpp"
#include "schedd/jobs.hpp"

namespace harmonia::schedd {

struct ServiceConfig {
  std::string strategy = "none";  ///< a coordination strategy (core/coordination registry)
  core::coordination::CoordinatorConfig coordinator;
  double lease_seconds = 10;  ///< a process silent this long is dropped
  /// Buffer nodes and the policy that places phases on them (docs/buffer-nodes.md); none: the
  /// coordination strategy alone.
  std::optional<BufferConfig> buffers;
  /// Users whose processes may register buffer nodes (root always may).
  std::vector<uid_t> node_uids;
  /// Processes a job may declare (RegisterProcess.ranks); more is refused.
  std::uint32_t max_ranks = 1U << 20;
  /// Users who may act for any job and file (root always), and who keep connection slots no
  /// user may take.
  common::Administrators admins;
  /// Decodes an Authenticate's credential: the user it names, or nothing and why. Unset: TCP
  /// connections cannot authenticate.
  std::function<std::optional<common::Identity>(const std::string&, std::string&)> check_credential;
  /// Whether an Authenticate's credential may stand beside the user a connection already acts
  /// for (common::CredentialChecker::confirms). Unset: every one may (it changes nothing).
  std::function<bool(uid_t, const std::string&, std::string&)> confirm_credential;
};

/// A message for one connection.
struct Outgoing {
  ConnectionId to;
  control::Envelope message;
};

class Service {
 public:
  /// Throws std::invalid_argument naming a bad strategy or setting.
  Service(ServiceConfig config, double now);

  /// A new connection; `uid` is the peer's user on a Unix socket (nullopt over TCP, until the
  /// connection authenticates).
  void on_connect(ConnectionId connection, std::optional<uid_t> uid, double now);
  /// One decoded request: appends its reply, and the directives it changed, to `out`.
  void on_message(ConnectionId connection, const control::Envelope& request, double now,
                  std::vector<Outgoing>& out);
  /// A frame that does not hold an Envelope: an error reply.
  void on_malformed(ConnectionId connection, double now, std::vector<Outgoing>& out);
  /// The connection is gone: its process leaves its job (the job ends with its last process).
  void on_disconnect(ConnectionId connection, double now, std::vector<Outgoing>& out);
  /// Time passes: flush windows move, and processes silent for a lease are dropped. Returns the
  /// connections dropped, for the server to close.
  std::vector<ConnectionId> on_tick(double now, std::vector<Outgoing>& out);

  /// The jobs with a process connected.
  size_t job_count() const { return jobs_.live_count(); }
  /// Everything a StatusRequest is answered (metrics read it).
  control::Status status(double now) const {
    control::Status out;
    fill_status(now, out);
    return out;
  }
  /// A connection's user, when known, and its job's key ("" before it registers): what a log
  /// line about it names.
  std::pair<std::optional<uid_t>, std::string> who(ConnectionId connection) const;
  size_t connection_count() const { return connections_.size(); }
  const ServiceConfig& config() const { return config_; }
  /// The buffer policy's results (JSON), or "" without buffer nodes.
  std::string buffer_results() const { return broker_ ? broker_->results_json() : ""; }
  /// The jobs' accounting records (none without buffer nodes); see BufferBroker::accounting.
  std::vector<core::AccountingRecord> accounting(double now, double clock_offset) const {
    return broker_ ? broker_->accounting(now, clock_offset) : std::vector<core::AccountingRecord>{};
  }

 private:
  static constexpr JobNumber kNoJob = -1;
  struct Connection {
    std::optional<uid_t> uid;
    double last_seen = 0;
    JobNumber job = kNoJob;  ///< until it registers
    bool in_phase = false;
    bool wants_flush = false;
    int buffer_node = -1;     ///< a buffer node's monitor, not a process
    bool node_agent = false;  ///< speaks for several ranks (harmonia-agentd)
  };
  void handle(ConnectionId id, Connection& connection, const control::Envelope& request, double now,
              control::Envelope& reply, std::vector<Outgoing>& out);
  /// SettleFile: orders every other process to write out what it stages of the file.
  void start_settle(ConnectionId id, const control::SettleFile& file, double now,
                    control::Envelope& reply, std::vector<Outgoing>& out);
  void settle_done(ConnectionId id, std::uint64_t settle, std::vector<Outgoing>& out);
  /// Pushes SettleComplete for the settles every process answered, and, given the time, for
  /// those whose wait has passed.
  void finish_settles(std::vector<Outgoing>& out, std::optional<double> now = std::nullopt);
  /// A connection is gone: nothing to wait for from it, and nothing to tell it.
  void drop_from_settles(ConnectionId id);
  void register_process(ConnectionId id, Connection& connection,
                        const control::RegisterProcess& request, double now,
                        control::Envelope& reply);
  /// `read`: the job's announced read phase begins (PhaseBegin.read).
  void set_phase(Connection& connection, JobNumber job, bool in_phase, double now,
                 double expected_bytes = 0, bool read = false);
  /// AnnounceRead: checks the files (false, with an error in `reply`, for a bad one) and hands
  /// the read phase to the buffer policy.
  bool announce_read(JobNumber job, const control::AnnounceRead& request, double now,
                     control::Envelope& reply);
  void authenticate(Connection& connection, const control::Authenticate& request,
                    control::Envelope& reply);
  void register_buffer(ConnectionId id, Connection& connection,
                       const control::RegisterBuffer& request, control::Envelope& reply);
  /// A buffer node's monitor is gone (`why`: how, for the warning logged): its slot waits for
  /// the node to register again.
  void forget_node(const Connection& connection, const std::string& why);
  /// Lets the buffer policy decide, and refreshes the directive `reply` carries.
  /// Pushes the job's new directive to its processes but `except`.
  void push_directive(JobNumber job, ConnectionId except, std::vector<Outgoing>& out);
  void decide_buffers(const Connection& connection, double now, control::Envelope& reply);
  void set_wants_flush(Connection& connection, JobNumber job, bool wants, double now);
  void leave(ConnectionId id, Connection& connection, double now);
  /// Pushes changed directives to every process of the changed jobs but `except`.
  void push_changes(ConnectionId except, std::vector<Outgoing>& out);
  void fill_directive(JobNumber job, control::Directive& out) const;
  void fill_status(double now, control::Status& out) const;

  ServiceConfig config_;
  double started_;
  std::unique_ptr<core::coordination::Coordinator> coordinator_;
  std::unordered_map<ConnectionId, Connection> connections_;
  /// Every job, by the number both policy cores know it by (schedd/jobs.hpp).
  JobTable jobs_;
  std::uint64_t requests_ = 0;
  std::uint64_t pushes_ = 0;  ///< messages sent that answer no request
  std::unique_ptr<BufferBroker> broker_;
  std::vector<ConnectionId> node_connection_;  ///< buffer slot -> its monitor (0: none)
  /// A file being settled for a process about to open it (SettleFile).
  struct Settle {
    std::vector<ConnectionId> requesters;  ///< the first, and those that joined it
    control::SettleFile file;
    double deadline;
    std::unordered_set<ConnectionId> waiting;  ///< processes asked that have not answered
    std::set<int> nodes;       ///< buffer nodes ordered to drain the file that have not yet
    double node_deadline = 0;  ///< when a node still down makes the settle `unavailable`
    /// The caller named a node this daemon has no slot of (never registered, or not since a
    /// restart): it is down for the settle, which ends `unavailable` at node_deadline.
    bool unknown_node = false;
  };
  using Settles = std::map<std::uint64_t, Settle>;
  /// Pushes SettleComplete to its requesters (complete: every process asked answered) and
  /// forgets it; the next settle.
  Settles::iterator complete_settle(Settles::iterator it, std::vector<Outgoing>& out);
  Settles settles_;
  std::uint64_t last_settle_ = 0;
  /// What the buffer nodes hold, by file (their reports), and the files each node must drain
  /// first for a settle (DrainOrder.urgent), by node and inode.
  HeldFiles held_;
  struct Urgent {
    std::string name;
    std::uint64_t id = 0;  ///< the node acknowledges it by this (BufferReport.urgent_done)
  };
  std::map<int, std::map<std::uint64_t, Urgent>> urgent_;  ///< by node, then inode
  std::uint64_t last_urgent_ = 0;
  std::set<int> urgent_changed_;  ///< nodes whose urgent list changed since the last push
  std::map<std::string, std::uint64_t> urgent_by_reason_;
  /// Orders `node` to drain the file `inode` first; a settle then waits for it.
  void order_urgent(int node, std::uint64_t inode, const std::string& name);
  /// `node` no longer needs to drain `inode` first (it did, or holds none): the settles
  /// waiting for it go on.
  void urgent_settled(int node, std::uint64_t inode, std::vector<Outgoing>& out);
  /// A node's report: its held files, and the settles that were waiting for what it released.
  void note_held(int node, const control::BufferReport& report, std::vector<Outgoing>& out);
  /// The node's whole order: the policy's, and the urgent drains.
  void fill_order(int node, control::DrainOrder& out) const;
  /// Whether buffer slot `node` has its monitor connected.
  bool node_connected(int node) const;
};

}  // namespace harmonia::schedd
