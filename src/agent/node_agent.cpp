#include "agent/node_agent.hpp"

#include <algorithm>
#include <stdexcept>

namespace harmonia::agent {

using control::Envelope;
using control::Error;

namespace {

constexpr size_t kMaxKeyLength = 256;

Envelope error_reply(std::uint64_t seq, Error::Code code, const std::string& message) {
  Envelope reply;
  reply.set_seq(seq);
  reply.mutable_error()->set_code(code);
  reply.mutable_error()->set_message("harmonia-agentd: " + message);
  return reply;
}

bool same(const control::Directive& a, const control::Directive& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

/// The directive an event's reply carries, if any.
const control::Directive* directive_in(const Envelope& message) {
  if (message.has_directive()) return &message.directive();
  if (message.has_registered()) return &message.registered().directive();
  if (message.has_settle_started()) return &message.settle_started().directive();
  return nullptr;
}

}  // namespace

NodeAgent::NodeAgent(AgentConfig config) : config_(std::move(config)) {
  if (config_.group_size < 1) throw std::invalid_argument("group size must be at least 1");
  if (!(config_.heartbeat_seconds > 0) || !(config_.unresponsive_seconds > 0) ||
      !(config_.lease_seconds > 0))
    throw std::invalid_argument("heartbeat, unresponsive and lease seconds must be > 0");
}

GroupId NodeAgent::group_of(RankId rank) const {
  const auto found = ranks_.find(rank);
  return found == ranks_.end() ? 0 : found->second.group;
}

void NodeAgent::on_rank_connect(RankId rank, std::optional<uid_t> uid, double now) {
  ranks_[rank] = Rank{uid, now};
}

void NodeAgent::to_rank(RankId rank, Envelope message, Effects& out) {
  ++counters_.to_ranks;
  out.to_ranks.emplace_back(rank, std::move(message));
}

std::uint64_t NodeAgent::send_up(GroupId id, Group& group, Envelope message, double now,
                                 Effects& out) {
  const std::uint64_t seq = group.next_seq++;
  message.set_seq(seq);
  group.pending[seq];  // replied to by the scheduler: waiters may join
  group.last_sent = now;
  ++counters_.to_scheduler;
  out.upstream.emplace_back(id, std::move(message));
  return seq;
}

void NodeAgent::on_rank_message(RankId id, const Envelope& request, double now, Effects& out) {
  const auto found = ranks_.find(id);
  if (found == ranks_.end()) return;
  ++counters_.from_ranks;
  Rank& rank = found->second;
  rank.last_seen = now;
  const std::uint64_t seq = request.seq();
  using Body = Envelope::BodyCase;
  if (request.body_case() == Body::kRegisterProcess) {
    register_rank(id, rank, request.register_process(), seq, now, out);
    return;
  }
  if (!rank.registered) {
    if (request.body_case() == Body::kHeartbeat || rank.left) {
      // A ping before registering, or what a leaving process still sends: write through.
      Envelope reply;
      reply.set_seq(seq);
      reply.mutable_directive();
      to_rank(id, std::move(reply), out);
      return;
    }
    to_rank(id,
            error_reply(seq, Error::CODE_NOT_REGISTERED,
                        rank.group ? "registration still under way" : "send RegisterProcess first"),
            out);
    return;
  }
  const GroupId group_id = rank.group;
  Group& group = groups_.at(group_id);
  std::uint64_t sent = 0;
  switch (request.body_case()) {
    case Body::kHeartbeat:
      break;
    case Body::kPhaseBegin:
      if (!rank.in_phase && group.in_phase == 0) group.phase = request.phase_begin();
      set_state(group, rank, true, rank.wants_flush);
      sent = sync(group_id, group, now, out);
      break;
    case Body::kPhaseEnd:
      set_state(group, rank, false, rank.wants_flush);
      sent = sync(group_id, group, now, out);
      break;
    case Body::kFlushRequest:
      set_state(group, rank, rank.in_phase, true);
      sent = sync(group_id, group, now, out);
      break;
    case Body::kFlushDone:
      set_state(group, rank, rank.in_phase, false);
      sent = sync(group_id, group, now, out);
      break;
    case Body::kUnregister: {
      leave(id, rank, now, out);
      rank.left = true;
      Envelope reply;
      reply.set_seq(seq);
      reply.mutable_directive();  // nothing holds it any more: write through
      to_rank(id, std::move(reply), out);
      return;
    }
    case Body::kSettleFile: {
      Envelope up;
      *up.mutable_settle_file() = request.settle_file();
      const std::uint64_t settle = send_up(group_id, group, std::move(up), now, out);
      answer(group, id, seq, settle, Reply::Settle, out);
      return;
    }
    case Body::kSettleDone:
      settle_answered(group_id, group, request.settle_done().id(), id, now, out);
      break;
    case Body::kAnnounceRead:
      // Every rank announces the job's read phase: the scheduler hears each list once.
      if (group.announced.insert(request.announce_read().SerializeAsString()).second) {
        Envelope up;
        *up.mutable_announce_read() = request.announce_read();
        sent = send_up(group_id, group, std::move(up), now, out);
      }
      break;
    default:
      to_rank(id,
              error_reply(seq, Error::CODE_INVALID,
                          "a node agent relays the events of ranks only; send this to "
                          "harmonia-schedd"),
              out);
      return;
  }
  // An event that changes nothing upstream still waits for a decision the scheduler is making
  // for the group (a second rank beginning while the first one's PhaseBegin is out): its reply
  // must not carry the directive from before. Heartbeats are answered here, never held up.
  if (!sent && request.body_case() != Body::kHeartbeat &&
      request.body_case() != Body::kSettleDone && group.pending.count(group.deciding))
    sent = group.deciding;
  answer(group, id, seq, sent, Reply::Directive, out);
}

void NodeAgent::register_rank(RankId id, Rank& rank, const control::RegisterProcess& request,
                              std::uint64_t seq, double now, Effects& out) {
  if (rank.group) {
    to_rank(id, error_reply(seq, Error::CODE_ALREADY_REGISTERED, "already registered"), out);
    return;
  }
  if (request.protocol_version() != control::VERSION_CURRENT) {
    to_rank(id,
            error_reply(seq, Error::CODE_VERSION,
                        "protocol version " + std::to_string(request.protocol_version()) +
                            " is not supported (this agent speaks " +
                            std::to_string(control::VERSION_CURRENT) + ")"),
            out);
    return;
  }
  if (request.job().empty() || request.job().size() > kMaxKeyLength) {
    to_rank(id, error_reply(seq, Error::CODE_INVALID, "RegisterProcess.job must be 1 to 256 bytes"),
            out);
    return;
  }
  // Identity: the agent acts with its own user's rights at the scheduler, so it speaks for that
  // user's ranks only, and for one job.
  if (!rank.uid || *rank.uid != config_.uid) {
    to_rank(id,
            error_reply(seq, Error::CODE_FORBIDDEN,
                        "this node agent speaks for uid " + std::to_string(config_.uid) +
                            (rank.uid ? ", not for uid " + std::to_string(*rank.uid)
                                      : ", and the peer's user is unknown")),
            out);
    return;
  }
  if (!config_.job.empty() && request.job() != config_.job) {
    to_rank(
        id,
        error_reply(seq, Error::CODE_FORBIDDEN,
                    "this node agent speaks for job " + config_.job + ", not for " + request.job()),
        out);
    return;
  }
  if (config_.job.empty()) config_.job = request.job();
  // The first group of the job with room, else a new one.
  GroupId group_id = 0;
  for (auto& [gid, g] : groups_)
    if (g.job == request.job() && g.ranks.size() < config_.group_size) {
      group_id = gid;
      break;
    }
  if (!group_id) {
    group_id = next_group_++;
    Group& fresh = groups_[group_id];
    fresh.job = request.job();
    fresh.lease = config_.lease_seconds;
    fresh.last_heard = now;
    out.open.push_back(group_id);
    Envelope up;
    auto* r = up.mutable_register_process();
    *r = request;
    r->set_in_phase(false);  // the rank's state is restated below, as the group's
    r->set_wants_flush(false);
    r->set_node_agent(true);
    fresh.registration_seq = send_up(group_id, fresh, std::move(up), now, out);
  }
  Group& group = groups_.at(group_id);
  group.ranks.insert(id);
  rank.group = group_id;
  if (request.in_phase() && group.in_phase == 0) group.phase.Clear();
  set_state(group, rank, request.in_phase(), request.wants_flush());
  if (!group.registered) {
    answer(group, id, seq, group.registration_seq, Reply::Registered, out);
    return;
  }
  rank.registered = true;
  // With a restated state, the reply waits for the scheduler's answer to it.
  answer(group, id, seq, sync(group_id, group, now, out), Reply::Registered, out);
}

void NodeAgent::set_state(Group& group, Rank& rank, bool in_phase, bool wants_flush) {
  if (in_phase != rank.in_phase) {
    if (in_phase)
      ++group.in_phase;
    else
      --group.in_phase;
    rank.in_phase = in_phase;
  }
  if (wants_flush != rank.wants_flush) {
    if (wants_flush)
      ++group.wants_flush;
    else
      --group.wants_flush;
    rank.wants_flush = wants_flush;
  }
}

std::uint64_t NodeAgent::sync(GroupId id, Group& group, double now, Effects& out) {
  if (!group.registered) return 0;
  std::uint64_t sent = 0;
  if ((group.in_phase > 0) != group.told_phase) {
    group.told_phase = group.in_phase > 0;
    Envelope up;
    if (group.told_phase)
      *up.mutable_phase_begin() = group.phase;
    else
      up.mutable_phase_end();
    sent = send_up(id, group, std::move(up), now, out);
  }
  if ((group.wants_flush > 0) != group.told_flush) {
    group.told_flush = group.wants_flush > 0;
    Envelope up;
    if (group.told_flush)
      up.mutable_flush_request();
    else
      up.mutable_flush_done();
    sent = send_up(id, group, std::move(up), now, out);
  }
  if (sent) group.deciding = sent;
  return sent;
}

void NodeAgent::answer(Group& group, RankId id, std::uint64_t seq, std::uint64_t sent, Reply reply,
                       Effects& out) {
  Rank& rank = ranks_.at(id);
  // Replies come from the scheduler in the order of its requests: waiting for the later of the
  // two keeps this rank's replies in the order of its own requests.
  if (rank.waiting_on && group.pending.count(rank.waiting_on))
    sent = std::max(sent, rank.waiting_on);
  if (sent) {
    group.pending[sent].push_back({id, seq, reply});
    rank.waiting_on = sent;
    return;
  }
  Envelope message;
  message.set_seq(seq);
  if (reply == Reply::Registered) {
    auto* registered = message.mutable_registered();
    registered->set_protocol_version(control::VERSION_CURRENT);
    registered->set_lease_seconds(group.lease);
    *registered->mutable_directive() = group.directive;
  } else {
    *message.mutable_directive() = group.directive;
  }
  to_rank(id, std::move(message), out);
}

void NodeAgent::fan_out(Group& group, const control::Directive& directive,
                        const std::vector<Waiter>& except, Effects& out) {
  for (RankId member : group.ranks) {
    if (!ranks_.at(member).registered) continue;
    if (std::any_of(except.begin(), except.end(),
                    [&](const Waiter& w) { return w.rank == member; }))
      continue;  // its reply carries the directive
    Envelope push;
    *push.mutable_directive() = directive;
    to_rank(member, std::move(push), out);
  }
}

void NodeAgent::on_upstream_message(GroupId id, const Envelope& message, double now, Effects& out) {
  const auto found = groups_.find(id);
  if (found == groups_.end()) return;
  ++counters_.from_scheduler;
  Group& group = found->second;
  group.last_heard = now;
  if (message.seq() == 0) {  // a push
    if (message.has_directive()) {
      if (!same(group.directive, message.directive())) {
        group.directive = message.directive();
        fan_out(group, group.directive, {}, out);
      }
    } else if (message.has_settle_order()) {
      settle_order(id, group, message.settle_order(), now, out);
    } else if (message.has_settle_complete()) {
      const auto requesters = group.settle_requesters.find(message.settle_complete().id());
      if (requesters == group.settle_requesters.end()) return;
      for (RankId rank : requesters->second) {
        Envelope push;
        *push.mutable_settle_complete() = message.settle_complete();
        to_rank(rank, std::move(push), out);
      }
      group.settle_requesters.erase(requesters);
    }
    return;
  }
  const auto pending = group.pending.find(message.seq());
  if (pending == group.pending.end()) return;  // an Authenticate's answer, or a stale seq
  const std::vector<Waiter> waiters = std::move(pending->second);
  group.pending.erase(pending);
  for (const Waiter& w : waiters)
    if (const auto rank = ranks_.find(w.rank);
        rank != ranks_.end() && rank->second.waiting_on == message.seq())
      rank->second.waiting_on = 0;
  if (message.has_error() && message.seq() == group.registration_seq && !group.registered) {
    // A refused registration (another user's job, a version): no group to speak for.
    for (const Waiter& w : waiters) {
      Envelope reply = message;
      reply.set_seq(w.seq);
      to_rank(w.rank, std::move(reply), out);
    }
    drop_group(id, out);
    return;
  }
  const control::Directive* directive = directive_in(message);
  const bool changed = directive && !same(group.directive, *directive);
  if (directive) group.directive = *directive;
  if (message.has_registered()) {
    group.registered = true;
    if (message.registered().lease_seconds() > 0)
      group.lease = message.registered().lease_seconds();
    for (const Waiter& w : waiters) ranks_.at(w.rank).registered = true;
    // Ranks that began a phase or asked to flush while the group registered: the scheduler
    // hears it now, and their Registered replies wait for its answer.
    if (const std::uint64_t sent = sync(id, group, now, out)) {
      for (const Waiter& w : waiters) answer(group, w.rank, w.seq, sent, w.reply, out);
      return;
    }
  }
  for (const Waiter& w : waiters) {
    if (ranks_.count(w.rank) == 0) continue;
    Envelope reply;
    reply.set_seq(w.seq);
    if (w.reply == Reply::Settle && message.has_error()) {
      *reply.mutable_error() = message.error();  // the scheduler refused this settle
    } else if (w.reply == Reply::Settle && message.has_settle_started()) {
      *reply.mutable_settle_started() = message.settle_started();
      if (message.settle_started().waiting() > 0)
        group.settle_requesters[message.settle_started().id()].push_back(w.rank);
    } else if (w.reply == Reply::Registered) {
      auto* registered = reply.mutable_registered();
      registered->set_protocol_version(control::VERSION_CURRENT);
      registered->set_lease_seconds(group.lease);
      *registered->mutable_directive() = group.directive;
    } else {
      *reply.mutable_directive() = group.directive;
    }
    to_rank(w.rank, std::move(reply), out);
  }
  if (changed) fan_out(group, group.directive, waiters, out);
}

void NodeAgent::settle_order(GroupId id, Group& group, const control::SettleOrder& order,
                             double now, Effects& out) {
  const auto requesters = group.settle_requesters.find(order.id());
  std::set<RankId> asked;
  for (RankId member : group.ranks) {
    if (!ranks_.at(member).registered) continue;
    if (requesters != group.settle_requesters.end() &&
        std::find(requesters->second.begin(), requesters->second.end(), member) !=
            requesters->second.end())
      continue;  // the opener writes out its own data itself
    asked.insert(member);
    Envelope push;
    *push.mutable_settle_order() = order;
    to_rank(member, std::move(push), out);
  }
  if (asked.empty()) {
    Envelope up;
    up.mutable_settle_done()->set_id(order.id());
    send_up(id, group, std::move(up), now, out);
    return;
  }
  group.settle_waiting[order.id()] = std::move(asked);
}

void NodeAgent::settle_answered(GroupId id, Group& group, std::uint64_t settle, RankId rank,
                                double now, Effects& out) {
  const auto waiting = group.settle_waiting.find(settle);
  if (waiting == group.settle_waiting.end()) return;
  waiting->second.erase(rank);
  if (!waiting->second.empty()) return;
  group.settle_waiting.erase(waiting);
  Envelope up;
  up.mutable_settle_done()->set_id(settle);
  send_up(id, group, std::move(up), now, out);
}

void NodeAgent::leave(RankId id, Rank& rank, double now, Effects& out) {
  if (!rank.group) return;
  const GroupId group_id = rank.group;
  Group& group = groups_.at(group_id);
  set_state(group, rank, false, false);
  group.ranks.erase(id);
  rank.group = 0;
  rank.registered = false;
  for (auto& [settle, requesters] : group.settle_requesters)
    requesters.erase(std::remove(requesters.begin(), requesters.end(), id), requesters.end());
  std::vector<std::uint64_t> answered;
  for (const auto& [settle, asked] : group.settle_waiting)
    if (asked.count(id)) answered.push_back(settle);
  for (std::uint64_t settle : answered) settle_answered(group_id, group, settle, id, now, out);
  for (auto& [seq, waiters] : group.pending)
    waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                                 [&](const Waiter& w) { return w.rank == id; }),
                  waiters.end());
  if (group.ranks.empty()) {
    // Closing the connection is the scheduler's Unregister: the group's phase and flush end.
    out.close_groups.push_back(group_id);
    groups_.erase(group_id);
    return;
  }
  sync(group_id, group, now, out);
}

void NodeAgent::on_rank_gone(RankId id, double now, Effects& out) {
  const auto found = ranks_.find(id);
  if (found == ranks_.end()) return;
  leave(id, found->second, now, out);
  ranks_.erase(found);
}

void NodeAgent::drop_group(GroupId id, Effects& out) {
  const auto found = groups_.find(id);
  if (found == groups_.end()) return;
  for (RankId member : found->second.ranks) {
    out.close_ranks.push_back(member);
    ranks_.erase(member);
  }
  groups_.erase(found);
  out.close_groups.push_back(id);
}

void NodeAgent::on_upstream_gone(GroupId id, Effects& out) { drop_group(id, out); }

void NodeAgent::on_tick(double now, Effects& out) {
  std::vector<GroupId> lost;
  for (auto& [id, group] : groups_) {
    const bool waiting = !group.pending.empty();
    if (waiting && now - group.last_heard > config_.unresponsive_seconds) {
      lost.push_back(id);  // a hung scheduler: the ranks must not wait for it
      continue;
    }
    if (group.registered && now - group.last_sent >= config_.heartbeat_seconds) {
      Envelope up;
      up.mutable_heartbeat();
      send_up(id, group, std::move(up), now, out);
    }
  }
  for (GroupId id : lost) drop_group(id, out);
  std::vector<RankId> silent;
  for (const auto& [id, rank] : ranks_) {
    const double lease = rank.group ? groups_.at(rank.group).lease : config_.lease_seconds;
    if (now - rank.last_seen > lease) silent.push_back(id);
  }
  for (RankId id : silent) {
    on_rank_gone(id, now, out);
    out.close_ranks.push_back(id);
  }
}

}  // namespace harmonia::agent
