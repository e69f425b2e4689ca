#pragma once
/// @file The node agent's state machine (harmonia-agentd; docs/node-agent.md). The ranks of a
/// job on one node connect to the node agent instead of harmonia-schedd and speak the same
/// control protocol (control.proto). The agent puts them in groups of up to `group_size` ranks;
/// each group has one connection to harmonia-schedd and speaks for its ranks there:
///   - the group is in an I/O phase from the first of its ranks' PhaseBegin to the last one's
///     PhaseEnd, and waits to flush from the first FlushRequest to the last FlushDone; only these
///     transitions reach the scheduler;
///   - heartbeats of ranks are answered here; the group sends its own;
///   - directives from the scheduler fan out to every rank of the group, and settle orders to
///     every rank but the one that opens the file, whose answers go back as one SettleDone.
/// It speaks only for ranks of its own user (SO_PEERCRED) and of one job. No sockets and no
/// threads: the server (main.cpp) feeds it decoded frames and carries out its Effects, and the
/// unit tests drive it directly.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/control.pb.h"

namespace harmonia::agent {

using RankId = std::uint64_t;   ///< a rank's connection to the node agent
using GroupId = std::uint64_t;  ///< a group's connection to harmonia-schedd

struct AgentConfig {
  uid_t uid = 0;    ///< the only user whose ranks the agent speaks for
  std::string job;  ///< the only job; "" binds the agent to the first job that registers
  std::uint32_t group_size = 64;
  double heartbeat_seconds = 0.25;    ///< a group silent this long sends a heartbeat
  double unresponsive_seconds = 1.0;  ///< a scheduler silent this long with a request out: lost
  double lease_seconds = 10;          ///< a rank silent this long leaves (until the scheduler says)
};

/// What the server must do after an event, in this order: open the groups' connections, send
/// upstream and to ranks, then close.
struct Effects {
  std::vector<GroupId> open;  ///< connect these groups to harmonia-schedd
  std::vector<std::pair<GroupId, control::Envelope>> upstream;
  std::vector<std::pair<RankId, control::Envelope>> to_ranks;
  std::vector<RankId> close_ranks;
  std::vector<GroupId> close_groups;
};

/// Messages counted since start (harmonia-agentd prints them at exit; docs/benchmarks.md).
struct Counters {
  std::uint64_t from_ranks = 0;
  std::uint64_t to_ranks = 0;
  std::uint64_t to_scheduler = 0;
  std::uint64_t from_scheduler = 0;
};

class NodeAgent {
 public:
  explicit NodeAgent(AgentConfig config);

  /// A rank connected; `uid` is its user (SO_PEERCRED), nullopt if the kernel did not say.
  void on_rank_connect(RankId rank, std::optional<uid_t> uid, double now);
  void on_rank_message(RankId rank, const control::Envelope& request, double now, Effects& out);
  /// The rank's connection closed (or was closed): it leaves its group.
  void on_rank_gone(RankId rank, double now, Effects& out);
  void on_upstream_message(GroupId group, const control::Envelope& message, double now,
                           Effects& out);
  /// The group's connection to the scheduler failed or closed: its ranks are disconnected, so
  /// that they speak to harmonia-schedd directly (or through this agent again, once it can).
  void on_upstream_gone(GroupId group, Effects& out);
  /// Time passes: heartbeats, silent schedulers and silent ranks.
  void on_tick(double now, Effects& out);

  const AgentConfig& config() const { return config_; }
  const Counters& counters() const { return counters_; }
  size_t group_count() const { return groups_.size(); }
  size_t rank_count() const { return ranks_.size(); }
  /// The group a rank belongs to (0: none).
  GroupId group_of(RankId rank) const;

 private:
  struct Rank {
    std::optional<uid_t> uid;
    double last_seen = 0;
    GroupId group = 0;
    bool registered = false;  ///< its Registered reply was sent
    bool left = false;        ///< it sent Unregister (its last heartbeats and flushes may follow)
    bool in_phase = false;
    bool wants_flush = false;
    /// The scheduler's reply its last held-up request waits for (0: none). A rank's replies go
    /// in the order of its requests, as the daemon's do: libharmonia's agent takes a reply to a
    /// later request as the answer to the earlier ones.
    std::uint64_t waiting_on = 0;
  };
  /// What a held-up request is answered with.
  enum class Reply { Directive, Registered, Settle };
  struct Waiter {
    RankId rank;
    std::uint64_t seq;
    Reply reply = Reply::Directive;
  };
  struct Group {
    std::string job;
    std::set<RankId> ranks;
    bool registered = false;  ///< the scheduler answered its RegisterProcess
    double lease = 10;
    std::uint32_t in_phase = 0, wants_flush = 0;  ///< ranks in a phase, ranks waiting to flush
    bool told_phase = false, told_flush = false;  ///< what the scheduler was told
    control::PhaseBegin phase;                    ///< the first rank's, forwarded
    control::Directive directive;
    std::uint64_t next_seq = 1;
    std::uint64_t registration_seq = 0;
    std::uint64_t deciding = 0;  ///< the last phase or flush event sent (decided once replied)
    std::map<std::uint64_t, std::vector<Waiter>> pending;  ///< upstream seq -> ranks waiting
    double last_sent = 0, last_heard = 0;
    std::map<std::uint64_t, std::vector<RankId>> settle_requesters;  ///< settle id -> openers
    std::map<std::uint64_t, std::set<RankId>> settle_waiting;        ///< settle id -> ranks asked
    std::set<std::string> announced;  ///< AnnounceRead lists sent up (serialized)
  };

  void register_rank(RankId id, Rank& rank, const control::RegisterProcess& request,
                     std::uint64_t seq, double now, Effects& out);
  /// Sends `message` to the group's scheduler connection with a fresh seq; returns the seq.
  std::uint64_t send_up(GroupId id, Group& group, control::Envelope message, double now,
                        Effects& out);
  /// Tells the scheduler the group's phase and flush state where it changed; the seq of the
  /// last request sent, or 0.
  std::uint64_t sync(GroupId id, Group& group, double now, Effects& out);
  void set_state(Group& group, Rank& rank, bool in_phase, bool wants_flush);
  /// Answers a rank's request: with the reply of `sent`, a request out to the scheduler (it
  /// brings the directive that follows the event), or after the reply the rank already waits
  /// for, else at once with the group's directive.
  void answer(Group& group, RankId rank, std::uint64_t seq, std::uint64_t sent, Reply reply,
              Effects& out);
  void to_rank(RankId rank, control::Envelope message, Effects& out);
  /// A new directive: every registered rank of the group but `except` gets it.
  void fan_out(Group& group, const control::Directive& directive, const std::vector<Waiter>& except,
               Effects& out);
  void settle_order(GroupId id, Group& group, const control::SettleOrder& order, double now,
                    Effects& out);
  /// The rank answered (or left): once every rank asked answered, one SettleDone goes up.
  void settle_answered(GroupId id, Group& group, std::uint64_t settle, RankId rank, double now,
                       Effects& out);
  void leave(RankId id, Rank& rank, double now, Effects& out);
  void drop_group(GroupId id, Effects& out);

  AgentConfig config_;
  Counters counters_;
  std::unordered_map<RankId, Rank> ranks_;
  std::map<GroupId, Group> groups_;
  GroupId next_group_ = 1;
};

}  // namespace harmonia::agent
