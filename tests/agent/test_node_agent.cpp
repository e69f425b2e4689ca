// The node agent's state machine (src/agent/node_agent.hpp), driven with the frames the server
// would decode: aggregation of phases, fan-out of directives and settle orders, identity, and
// failures of the scheduler.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent/node_agent.hpp"

using namespace harmonia::agent;
using harmonia::control::Envelope;
using harmonia::control::Error;

namespace {

constexpr uid_t kUser = 1000;

Envelope registration(const std::string& job, std::uint32_t rank, std::uint64_t seq = 1) {
  Envelope e;
  e.set_seq(seq);
  auto* r = e.mutable_register_process();
  r->set_protocol_version(1);
  r->set_job(job);
  r->set_rank(rank);
  r->set_ranks(1024);
  return e;
}

Envelope event(std::uint64_t seq, Envelope::BodyCase body) {
  Envelope e;
  e.set_seq(seq);
  switch (body) {
    case Envelope::kPhaseBegin:
      e.mutable_phase_begin()->set_expected_bytes(4096);
      break;
    case Envelope::kPhaseEnd:
      e.mutable_phase_end();
      break;
    case Envelope::kFlushRequest:
      e.mutable_flush_request();
      break;
    case Envelope::kFlushDone:
      e.mutable_flush_done();
      break;
    case Envelope::kHeartbeat:
      e.mutable_heartbeat();
      break;
    case Envelope::kUnregister:
      e.mutable_unregister();
      break;
    default:
      ADD_FAILURE() << "no such event in these tests";
  }
  return e;
}

Envelope directive_reply(std::uint64_t seq, bool stage, std::uint64_t epoch) {
  Envelope e;
  e.set_seq(seq);
  e.mutable_directive()->set_mode(stage ? harmonia::control::MODE_STAGE
                                        : harmonia::control::MODE_WRITE_THROUGH);
  e.mutable_directive()->set_epoch(epoch);
  return e;
}

/// A node agent with a clock, the effects of the last call, and helpers.
struct Harness {
  explicit Harness(std::uint32_t group_size = 64, std::string job = "")
      : agent([&] {
          AgentConfig c;
          c.uid = kUser;
          c.job = std::move(job);
          c.group_size = group_size;
          return c;
        }()) {}
  NodeAgent agent;
  double now = 0;
  Effects out;

  Effects& from_rank(RankId rank, const Envelope& message) {
    out = Effects{};
    agent.on_rank_message(rank, message, now, out);
    return out;
  }
  Effects& from_scheduler(GroupId group, const Envelope& message) {
    out = Effects{};
    agent.on_upstream_message(group, message, now, out);
    return out;
  }
  Effects& tick(double at) {
    now = at;
    out = Effects{};
    agent.on_tick(now, out);
    return out;
  }

  /// Connects ranks first..last-1 of job "J" and completes their groups' registrations with
  /// the scheduler (each group's RegisterProcess is its seq 1).
  void join(RankId first, RankId last, const std::string& job = "J") {
    std::vector<GroupId> opened;
    for (RankId r = first; r < last; ++r) {
      agent.on_rank_connect(r, kUser, now);
      from_rank(r, registration(job, static_cast<std::uint32_t>(r)));
      opened.insert(opened.end(), out.open.begin(), out.open.end());
    }
    for (GroupId g : opened) {
      Envelope registered;
      registered.set_seq(1);
      registered.mutable_registered()->set_protocol_version(1);
      registered.mutable_registered()->set_lease_seconds(10);
      from_scheduler(g, registered);
    }
  }

  /// The messages sent upstream with the given body.
  static size_t upstream_of(const Effects& e, Envelope::BodyCase body) {
    return static_cast<size_t>(
        std::count_if(e.upstream.begin(), e.upstream.end(),
                      [&](const auto& m) { return m.second.body_case() == body; }));
  }
  static std::vector<RankId> ranks_sent(const Effects& e, Envelope::BodyCase body) {
    std::vector<RankId> ranks;
    for (const auto& [rank, message] : e.to_ranks)
      if (message.body_case() == body) ranks.push_back(rank);
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }
};

TEST(NodeAgent, RanksOfAJobShareOneSchedulerConnectionAndRegisterOnce) {
  Harness h;
  h.agent.on_rank_connect(1, kUser, 0);
  h.from_rank(1, registration("J", 0));
  ASSERT_EQ(h.out.open.size(), 1u);
  ASSERT_EQ(h.out.upstream.size(), 1u);
  const Envelope up = h.out.upstream[0].second;
  EXPECT_TRUE(up.register_process().node_agent());
  EXPECT_EQ(up.register_process().job(), "J");
  EXPECT_TRUE(h.out.to_ranks.empty()) << "the rank's Registered waits for the scheduler's";
  h.agent.on_rank_connect(2, kUser, 0);
  h.from_rank(2, registration("J", 1, 7));
  EXPECT_TRUE(h.out.open.empty());
  EXPECT_TRUE(h.out.upstream.empty());
  Envelope registered;
  registered.set_seq(up.seq());
  registered.mutable_registered()->set_lease_seconds(3);
  registered.mutable_registered()->mutable_directive()->set_mode(harmonia::control::MODE_STAGE);
  h.from_scheduler(1, registered);
  ASSERT_EQ(h.out.to_ranks.size(), 2u);
  for (const auto& [rank, reply] : h.out.to_ranks) {
    ASSERT_TRUE(reply.has_registered());
    EXPECT_EQ(reply.seq(), rank == 1 ? 1u : 7u) << "each rank gets its own seq back";
    EXPECT_EQ(reply.registered().lease_seconds(), 3);
    EXPECT_EQ(reply.registered().directive().mode(), harmonia::control::MODE_STAGE);
  }
}

TEST(NodeAgent, AGroupIsInAPhaseFromItsFirstRanksBeginToItsLastRanksEnd) {
  Harness h;
  h.join(1, 4);  // ranks 1, 2, 3
  h.from_rank(2, event(10, Envelope::kPhaseBegin));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseBegin), 1u);
  EXPECT_EQ(h.out.upstream[0].second.phase_begin().expected_bytes(), 4096u);
  EXPECT_TRUE(h.out.to_ranks.empty()) << "the first rank's begin waits for the decision";
  const std::uint64_t begin_seq = h.out.upstream[0].second.seq();
  // A second rank begins while the decision is out: it waits for the same reply.
  h.from_rank(1, event(11, Envelope::kPhaseBegin));
  EXPECT_TRUE(h.out.upstream.empty());
  EXPECT_TRUE(h.out.to_ranks.empty());
  h.from_scheduler(1, directive_reply(begin_seq, true, 1));
  ASSERT_EQ(Harness::ranks_sent(h.out, Envelope::kDirective), (std::vector<RankId>{1, 2, 3}))
      << "both waiting ranks get their reply, and rank 3 the new directive as a push";
  for (const auto& [rank, message] : h.out.to_ranks) {
    EXPECT_EQ(message.directive().mode(), harmonia::control::MODE_STAGE);
    EXPECT_EQ(message.seq(), rank == 2 ? 10u : rank == 1 ? 11u : 0u);
  }
  // Once decided, a later rank's begin is answered here, with the group's directive.
  h.from_rank(3, event(12, Envelope::kPhaseBegin));
  EXPECT_TRUE(h.out.upstream.empty());
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_EQ(h.out.to_ranks[0].second.seq(), 12u);
  EXPECT_EQ(h.out.to_ranks[0].second.directive().mode(), harmonia::control::MODE_STAGE);
  // Ends: only the last one reaches the scheduler.
  h.from_rank(2, event(13, Envelope::kPhaseEnd));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseEnd), 0u);
  h.from_rank(1, event(14, Envelope::kPhaseEnd));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseEnd), 0u);
  h.from_rank(3, event(15, Envelope::kPhaseEnd));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseEnd), 1u);
  // The next phase begins anew.
  h.from_rank(3, event(16, Envelope::kPhaseBegin));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseBegin), 1u);
}

TEST(NodeAgent, FlushRequestsAggregateLikePhases) {
  Harness h;
  h.join(1, 3);
  h.from_rank(1, event(5, Envelope::kFlushRequest));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kFlushRequest), 1u);
  h.from_rank(2, event(5, Envelope::kFlushRequest));
  EXPECT_EQ(h.out.upstream.size(), 0u);
  h.from_rank(1, event(6, Envelope::kFlushDone));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kFlushDone), 0u);
  h.from_rank(2, event(6, Envelope::kFlushDone));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kFlushDone), 1u);
}

TEST(NodeAgent, ARankLeavingEndsItsShareOfThePhase) {
  Harness h;
  h.join(1, 3);
  h.from_rank(1, event(5, Envelope::kPhaseBegin));
  h.from_rank(2, event(5, Envelope::kPhaseBegin));
  h.out = Effects{};
  h.agent.on_rank_gone(1, h.now, h.out);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseEnd), 0u);
  h.from_rank(2, event(6, Envelope::kUnregister));
  // The last rank gone: the group's connection closes, which the scheduler takes as the end
  // of its phase and its leaving.
  EXPECT_EQ(h.out.close_groups, (std::vector<GroupId>{1}));
  EXPECT_EQ(h.agent.group_count(), 0u);
  // What a leaving process still sends (its last flush at exit) is answered, not refused.
  h.from_rank(2, event(7, Envelope::kFlushDone));
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_TRUE(h.out.to_ranks[0].second.has_directive());
  EXPECT_TRUE(h.out.upstream.empty());
}

TEST(NodeAgent, DirectivesPushedByTheSchedulerFanOutToTheGroupOnly) {
  Harness h(2);
  h.join(1, 5);  // groups: {1, 2} and {3, 4}
  ASSERT_EQ(h.agent.group_count(), 2u);
  const GroupId second = h.agent.group_of(3);
  ASSERT_NE(second, h.agent.group_of(1));
  EXPECT_EQ(h.agent.group_of(4), second);
  h.from_scheduler(second, directive_reply(0, true, 4));
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kDirective), (std::vector<RankId>{3, 4}));
  // The same directive again changes nothing: no pushes.
  h.from_scheduler(second, directive_reply(0, true, 4));
  EXPECT_TRUE(h.out.to_ranks.empty());
}

TEST(NodeAgent, GroupsHoldAtMostGroupSizeRanks) {
  Harness h(64);
  size_t opened = 0;
  for (RankId r = 1; r <= 130; ++r) {
    h.agent.on_rank_connect(r, kUser, 0);
    h.from_rank(r, registration("J", static_cast<std::uint32_t>(r)));
    opened += h.out.open.size();
  }
  EXPECT_EQ(opened, 3u);  // 64 + 64 + 2
  EXPECT_EQ(h.agent.group_count(), 3u);
  EXPECT_EQ(h.agent.group_of(64), h.agent.group_of(1));
  EXPECT_NE(h.agent.group_of(65), h.agent.group_of(64));
}

TEST(NodeAgent, RanksOfAnotherUserOrJobAreRefused) {
  Harness h(64, "J");
  h.agent.on_rank_connect(1, kUser + 1, 0);
  h.from_rank(1, registration("J", 0));
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_FORBIDDEN);
  EXPECT_NE(h.out.to_ranks[0].second.error().message().find("uid 1001"), std::string::npos);
  EXPECT_TRUE(h.out.open.empty());
  h.agent.on_rank_connect(2, std::nullopt, 0);
  h.from_rank(2, registration("J", 0));
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_FORBIDDEN);
  h.agent.on_rank_connect(3, kUser, 0);
  h.from_rank(3, registration("K", 0));
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_FORBIDDEN);
  EXPECT_EQ(h.agent.group_count(), 0u);
  // Events of a refused rank are not relayed.
  h.from_rank(1, event(2, Envelope::kPhaseBegin));
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_NOT_REGISTERED);
  EXPECT_TRUE(h.out.upstream.empty());
}

TEST(NodeAgent, WithoutAJobGivenTheFirstJobBindsTheAgent) {
  Harness h;
  h.join(1, 2, "first");
  h.agent.on_rank_connect(2, kUser, 0);
  h.from_rank(2, registration("second", 0));
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_FORBIDDEN);
}

TEST(NodeAgent, ARefusedRegistrationReachesTheRanksAndDropsTheGroup) {
  Harness h;
  h.agent.on_rank_connect(1, kUser, 0);
  h.from_rank(1, registration("J", 0, 9));
  Envelope refused;
  refused.set_seq(1);
  refused.mutable_error()->set_code(Error::CODE_FORBIDDEN);
  h.from_scheduler(1, refused);
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_EQ(h.out.to_ranks[0].second.seq(), 9u);
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_FORBIDDEN);
  EXPECT_EQ(h.out.close_ranks, (std::vector<RankId>{1}));
  EXPECT_EQ(h.agent.group_count(), 0u);
}

TEST(NodeAgent, HeartbeatsOfRanksAreAnsweredHereAndTheGroupSendsItsOwn) {
  Harness h;
  h.join(1, 4);
  h.now = 0.1;
  for (RankId r = 1; r < 4; ++r) {
    h.from_rank(r, event(20, Envelope::kHeartbeat));
    EXPECT_TRUE(h.out.upstream.empty());
    ASSERT_EQ(h.out.to_ranks.size(), 1u);
    EXPECT_EQ(h.out.to_ranks[0].second.seq(), 20u);
  }
  h.tick(0.2);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kHeartbeat), 0u);
  h.tick(0.3);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kHeartbeat), 1u) << "one for three ranks";
}

TEST(NodeAgent, AHungSchedulerDisconnectsTheRanksSoTheyGoDirect) {
  Harness h;
  h.join(1, 3);
  h.from_rank(1, event(5, Envelope::kPhaseBegin));  // no reply ever comes
  h.tick(0.5);
  EXPECT_TRUE(h.out.close_ranks.empty());
  h.tick(1.2);
  auto closed = h.out.close_ranks;
  std::sort(closed.begin(), closed.end());
  EXPECT_EQ(closed, (std::vector<RankId>{1, 2}));
  EXPECT_EQ(h.out.close_groups, (std::vector<GroupId>{1}));
}

TEST(NodeAgent, ALostSchedulerConnectionDisconnectsItsRanks) {
  Harness h(1);
  h.join(1, 3);
  h.out = Effects{};
  h.agent.on_upstream_gone(h.agent.group_of(2), h.out);
  EXPECT_EQ(h.out.close_ranks, (std::vector<RankId>{2}));
  EXPECT_EQ(h.agent.group_count(), 1u) << "the other group keeps its connection";
}

TEST(NodeAgent, SilentRanksLoseTheirPlace) {
  Harness h;
  h.join(1, 3);
  h.from_rank(1, event(5, Envelope::kPhaseBegin));
  h.from_scheduler(1, directive_reply(h.out.upstream[0].second.seq(), true, 1));
  for (double t = 1; t <= 9; t += 1) {
    h.now = t;
    h.from_rank(2, event(6, Envelope::kHeartbeat));
    h.from_scheduler(1, directive_reply(0, true, 1));
  }
  h.tick(10.5);  // rank 1 silent since 0, rank 2 since 9
  EXPECT_EQ(h.out.close_ranks, (std::vector<RankId>{1}));
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseEnd), 1u);
}

TEST(NodeAgent, SettleOrdersFanOutToTheOtherRanksAndAnswerOnce) {
  Harness h;
  h.join(1, 4);
  Envelope settle;
  settle.set_seq(30);
  settle.mutable_settle_file()->set_path("/data/f");
  h.from_rank(1, settle);
  ASSERT_EQ(h.out.upstream.size(), 1u);
  const std::uint64_t up = h.out.upstream[0].second.seq();
  Envelope started;
  started.set_seq(up);
  started.mutable_settle_started()->set_id(77);
  started.mutable_settle_started()->set_waiting(2);
  h.from_scheduler(1, started);
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_EQ(h.out.to_ranks[0].first, 1u);
  EXPECT_EQ(h.out.to_ranks[0].second.seq(), 30u);
  EXPECT_EQ(h.out.to_ranks[0].second.settle_started().id(), 77u);
  Envelope order;
  order.mutable_settle_order()->set_id(77);
  order.mutable_settle_order()->mutable_file()->set_path("/data/f");
  h.from_scheduler(1, order);
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kSettleOrder), (std::vector<RankId>{2, 3}))
      << "every rank but the opener";
  Envelope done;
  done.set_seq(31);
  done.mutable_settle_done()->set_id(77);
  h.from_rank(2, done);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kSettleDone), 0u);
  h.from_rank(3, done);
  ASSERT_EQ(Harness::upstream_of(h.out, Envelope::kSettleDone), 1u);
  EXPECT_EQ(h.out.upstream[0].second.settle_done().id(), 77u);
  Envelope complete;
  complete.mutable_settle_complete()->set_id(77);
  complete.mutable_settle_complete()->set_complete(true);
  h.from_scheduler(1, complete);
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kSettleComplete), (std::vector<RankId>{1}));
}

TEST(NodeAgent, ASettleOrderWithNobodyElseInTheGroupIsAnsweredAtOnce) {
  Harness h;
  h.join(1, 2);
  Envelope order;
  order.mutable_settle_order()->set_id(5);
  h.from_scheduler(1, order);  // another node's rank opens a file: rank 1 is asked
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kSettleOrder), (std::vector<RankId>{1}));
  h.out = Effects{};
  h.agent.on_rank_gone(1, 0, h.out);  // it leaves without answering: nothing to wait for
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kSettleDone), 1u);
}

TEST(NodeAgent, ARankRestatingItsPhaseAfterAReconnectStartsTheGroupsPhase) {
  Harness h;
  h.join(1, 2);
  h.agent.on_rank_connect(2, kUser, 0);
  Envelope again = registration("J", 1, 3);
  again.mutable_register_process()->set_in_phase(true);
  h.from_rank(2, again);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kPhaseBegin), 1u);
  EXPECT_TRUE(h.out.to_ranks.empty()) << "its Registered carries the decision";
  h.from_scheduler(1, directive_reply(h.out.upstream[0].second.seq(), true, 2));
  ASSERT_EQ(Harness::ranks_sent(h.out, Envelope::kRegistered), (std::vector<RankId>{2}));
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kDirective), (std::vector<RankId>{1}));
}

TEST(NodeAgent, RequestsOnlyTheSchedulerAnswersAreRefused) {
  Harness h;
  h.join(1, 2);
  Envelope status;
  status.set_seq(4);
  status.mutable_status_request();
  h.from_rank(1, status);
  EXPECT_EQ(h.out.to_ranks[0].second.error().code(), Error::CODE_INVALID);
  EXPECT_TRUE(h.out.upstream.empty());
}

TEST(NodeAgent, CountsMessagesBothWays) {
  Harness h;
  h.join(1, 3);  // 2 registrations from ranks, 1 to the scheduler, 1 back, 2 replies
  const Counters c = h.agent.counters();
  EXPECT_EQ(c.from_ranks, 2u);
  EXPECT_EQ(c.to_scheduler, 1u);
  EXPECT_EQ(c.from_scheduler, 1u);
  EXPECT_EQ(c.to_ranks, 2u);
}

}  // namespace

TEST(NodeAgent, ARanksRepliesKeepTheOrderOfItsRequests) {
  Harness h;
  h.join(1, 2);
  h.from_rank(1, event(10, Envelope::kPhaseBegin));
  const std::uint64_t begin = h.out.upstream[0].second.seq();
  // Its heartbeat right after must not be answered first, with the directive from before the
  // phase: libharmonia's agent takes any later reply as the end of its wait for the earlier.
  h.from_rank(1, event(11, Envelope::kHeartbeat));
  EXPECT_TRUE(h.out.to_ranks.empty());
  h.from_scheduler(1, directive_reply(begin, true, 1));
  ASSERT_EQ(h.out.to_ranks.size(), 2u);
  EXPECT_EQ(h.out.to_ranks[0].second.seq(), 10u);
  EXPECT_EQ(h.out.to_ranks[1].second.seq(), 11u);
  EXPECT_EQ(h.out.to_ranks[1].second.directive().mode(), harmonia::control::MODE_STAGE);
  // Nothing held up any more: answered at once.
  h.from_rank(1, event(12, Envelope::kHeartbeat));
  ASSERT_EQ(h.out.to_ranks.size(), 1u);
  EXPECT_EQ(h.out.to_ranks[0].second.seq(), 12u);
}

TEST(NodeAgent, AReadAnnouncedByEveryRankGoesUpOnceAndEachRankGetsTheReply) {
  Harness h;
  h.join(1, 5);
  Envelope announce;
  auto* file = announce.mutable_announce_read()->add_files();
  file->set_file("run/in.h5");
  file->set_size(1 << 20);
  announce.set_seq(2);
  h.from_rank(1, announce);
  ASSERT_EQ(Harness::upstream_of(h.out, Envelope::kAnnounceRead), 1u);
  const Envelope up = h.out.upstream[0].second;
  EXPECT_EQ(up.announce_read().files(0).file(), "run/in.h5");
  EXPECT_TRUE(h.out.to_ranks.empty()) << "its reply waits for the scheduler's";
  for (RankId r = 2; r < 5; ++r) {
    h.from_rank(r, announce);
    EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kAnnounceRead), 0u) << "rank " << r;
  }
  h.from_scheduler(1, directive_reply(up.seq(), true, 3));
  EXPECT_EQ(Harness::ranks_sent(h.out, Envelope::kDirective), (std::vector<RankId>{1, 2, 3, 4}));
  // Another list goes up again.
  file->set_file("run/other.h5");
  h.from_rank(2, announce);
  EXPECT_EQ(Harness::upstream_of(h.out, Envelope::kAnnounceRead), 1u);
}
