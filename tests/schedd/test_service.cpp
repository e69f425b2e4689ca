// The scheduler daemon's state machine, driven with requests as the server would decode them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "schedd/service.hpp"

using namespace harmonia::schedd;
using harmonia::control::Envelope;
using harmonia::control::Error;

namespace {

ServiceConfig config(const std::string& strategy, double lease = 10) {
  ServiceConfig c;
  c.strategy = strategy;
  c.coordinator.pfs_servers = 8;
  c.lease_seconds = lease;
  return c;
}

Envelope registration(const std::string& job, bool in_phase = false, std::uint32_t version = 1) {
  Envelope e;
  auto* r = e.mutable_register_process();
  r->set_protocol_version(version);
  r->set_job(job);
  r->set_ranks(4);
  r->set_bytes_per_process(16e6);
  r->set_in_phase(in_phase);
  return e;
}

Envelope phase_begin() {
  Envelope e;
  e.mutable_phase_begin();
  return e;
}
Envelope phase_end() {
  Envelope e;
  e.mutable_phase_end();
  return e;
}
Envelope flush_request() {
  Envelope e;
  e.mutable_flush_request();
  return e;
}

/// A service with a clock and helpers that return the reply to each request.
struct Harness {
  explicit Harness(ServiceConfig c) : service(std::move(c), 0) {}
  Service service;
  double now = 0;
  std::vector<Outgoing> pushes;

  void connect(ConnectionId id, std::optional<uid_t> uid = 1000) {
    service.on_connect(id, uid, now);
  }
  /// Connects `id` and registers it as a process of `job`.
  void join(ConnectionId id, const std::string& job) {
    connect(id);
    call(id, registration(job));
  }
  Envelope call(ConnectionId id, Envelope request, std::uint64_t seq = 7) {
    request.set_seq(seq);
    std::vector<Outgoing> out;
    service.on_message(id, request, now, out);
    EXPECT_FALSE(out.empty());
    EXPECT_EQ(out.front().to, id);
    EXPECT_EQ(out.front().message.seq(), seq) << "the reply echoes the request's seq";
    Envelope reply = out.front().message;
    pushes.insert(pushes.end(), out.begin() + 1, out.end());
    return reply;
  }
  bool stages(const Envelope& reply) {
    const auto& d = reply.has_registered() ? reply.registered().directive() : reply.directive();
    return d.mode() == harmonia::control::MODE_STAGE;
  }
};

}  // namespace

TEST(Service, RejectsBadStrategyAndLease) {
  EXPECT_THROW(Service(config("4c"), 0), std::invalid_argument);
  EXPECT_THROW(Service(config("2a", 0), 0), std::invalid_argument);
}

TEST(Service, RegistersAndRepliesWithTheDirective) {
  Harness h(config("2a"));
  h.connect(1);
  const Envelope reply = h.call(1, registration("A"));
  ASSERT_TRUE(reply.has_registered());
  EXPECT_EQ(reply.registered().protocol_version(), 1u);
  EXPECT_EQ(reply.registered().lease_seconds(), 10);
  EXPECT_FALSE(h.stages(reply));
  EXPECT_EQ(h.service.job_count(), 1u);
}

TEST(Service, OutOfOrderUnknownAndForeignMessagesGetErrors) {
  Harness h(config("2a"));
  h.connect(1);
  EXPECT_EQ(h.call(1, phase_begin()).error().code(), Error::CODE_NOT_REGISTERED);
  EXPECT_EQ(h.call(1, Envelope()).error().code(), Error::CODE_UNKNOWN_MESSAGE);
  Envelope directive;
  directive.mutable_directive();
  EXPECT_EQ(h.call(1, directive).error().code(), Error::CODE_NOT_A_REQUEST);
  EXPECT_EQ(h.call(1, registration("A", false, 2)).error().code(), Error::CODE_VERSION);
  EXPECT_EQ(h.call(1, registration("")).error().code(), Error::CODE_INVALID);
  EXPECT_EQ(h.call(1, registration(std::string(300, 'x'))).error().code(), Error::CODE_INVALID);
  ASSERT_TRUE(h.call(1, registration("A")).has_registered());
  EXPECT_EQ(h.call(1, registration("B")).error().code(), Error::CODE_ALREADY_REGISTERED);
  std::vector<Outgoing> out;
  h.service.on_malformed(1, 0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.error().code(), Error::CODE_MALFORMED);
}

TEST(Service, AJobKeyNamesOneOfItsUsersJobsSoNobodyTakesAnothers) {
  Harness h(config("2a"));
  h.connect(1, 1000);
  h.connect(2, 1001);
  h.connect(3, 1000);
  // mallory (1001) registers alice's key first: she gets a job of her own, not alice's.
  ASSERT_TRUE(h.call(2, registration("slurm-4242")).has_registered());
  h.call(2, phase_begin());
  ASSERT_TRUE(h.call(1, registration("slurm-4242")).has_registered());
  EXPECT_TRUE(h.call(3, registration("slurm-4242")).has_registered())
      << "the same user: one more process of the same job";
  EXPECT_EQ(h.service.job_count(), 2u);
  Envelope request;
  request.mutable_status_request();
  const Envelope status = h.call(1, request);
  ASSERT_EQ(status.status().jobs_size(), 2);
  for (const auto& job : status.status().jobs()) {
    EXPECT_EQ(job.job(), "slurm-4242");
    EXPECT_EQ(job.processes(), job.uid() == 1000 ? 2u : 1u);
    EXPECT_EQ(job.in_phase(), job.uid() == 1001 ? 1u : 0u) << "mallory's phase is hers alone";
  }
}

Envelope authenticate(const std::string& credential) {
  Envelope e;
  e.mutable_authenticate()->set_credential(credential);
  return e;
}

/// A credential checker for the tests: "uid:N" names user N, anything else is refused (and
/// cannot confirm or contradict a connection's user).
ServiceConfig with_credentials() {
  ServiceConfig c = config("2a");
  c.admins.uids = {450};
  c.check_credential = [](const std::string& credential, std::string& why) {
    if (credential.rfind("uid:", 0) == 0) {
      const auto uid = static_cast<uid_t>(std::stoul(credential.substr(4)));
      return std::optional<harmonia::common::Identity>({uid, uid});
    }
    why = "forged";
    return std::optional<harmonia::common::Identity>();
  };
  c.confirm_credential = [](uid_t known, const std::string& credential, std::string& why) {
    if (credential.rfind("uid:", 0) != 0 || std::stoul(credential.substr(4)) == known) return true;
    why = "names another user";
    return false;
  };
  return c;
}

TEST(Service, OverTcpACredentialsUserIsTheConnectionsAndItsJobsAreThatUsers) {
  Harness h(with_credentials());
  h.connect(1, 1000);
  ASSERT_TRUE(h.call(1, registration("A")).has_registered());
  h.connect(6, std::nullopt);  // a peer on another host
  const Envelope who = h.call(6, authenticate("uid:1000"));
  ASSERT_TRUE(who.has_authenticated());
  EXPECT_EQ(who.authenticated().uid(), 1000u);
  EXPECT_TRUE(h.call(6, registration("A")).has_registered());
  h.connect(7, std::nullopt);
  ASSERT_TRUE(h.call(7, authenticate("uid:1001")).has_authenticated());
  EXPECT_TRUE(h.call(7, registration("A")).has_registered());
  EXPECT_EQ(h.service.job_count(), 2u) << "uid 1001's A is not uid 1000's";
}

TEST(Service, OnlyAuthenticateIsServedUntilAConnectionHasAnIdentity) {
  Harness h(with_credentials());
  h.connect(1, std::nullopt);
  for (const Envelope& request : {registration("A"), phase_begin(), flush_request()})
    EXPECT_EQ(h.call(1, request).error().code(), Error::CODE_UNAUTHENTICATED);
  Envelope status;
  status.mutable_status_request();
  EXPECT_EQ(h.call(1, status).error().code(), Error::CODE_UNAUTHENTICATED);
  const Envelope forged = h.call(1, authenticate("forged"));
  EXPECT_EQ(forged.error().code(), Error::CODE_UNAUTHENTICATED);
  EXPECT_EQ(forged.error().message(), "forged");
  EXPECT_EQ(h.call(1, registration("A")).error().code(), Error::CODE_UNAUTHENTICATED);
  ASSERT_TRUE(h.call(1, authenticate("uid:1000")).has_authenticated());
  EXPECT_TRUE(h.call(1, registration("A")).has_registered());
  // An identity, once bound, is the connection's for its life: a credential may confirm it,
  // never change it.
  const Envelope other = h.call(1, authenticate("uid:0"));
  EXPECT_EQ(other.error().code(), Error::CODE_UNAUTHENTICATED);
  EXPECT_EQ(other.error().message(), "names another user");
  const Envelope same = h.call(1, authenticate("uid:1000"));
  ASSERT_TRUE(same.has_authenticated());
  EXPECT_EQ(same.authenticated().uid(), 1000u);
  // A Unix socket's (or a loopback peer's) identity comes from the kernel: no credential is
  // needed; one naming that user, or one this daemon cannot decode, is answered with it, one
  // naming another user is refused, and the connection stays its user's.
  h.connect(2, 1001);
  EXPECT_TRUE(h.call(2, registration("B")).has_registered());
  for (const char* credential : {"uid:1001", "garbage"}) {
    const Envelope confirmed = h.call(2, authenticate(credential));
    ASSERT_TRUE(confirmed.has_authenticated()) << credential;
    EXPECT_EQ(confirmed.authenticated().uid(), 1001u);
  }
  EXPECT_EQ(h.call(2, authenticate("uid:0")).error().code(), Error::CODE_UNAUTHENTICATED);
  h.connect(3, 1002);
  EXPECT_EQ(h.call(3, authenticate("uid:0")).error().code(), Error::CODE_UNAUTHENTICATED);
  ASSERT_TRUE(h.call(3, registration("C")).has_registered());
  const auto jobs = h.call(3, status).status().jobs();
  EXPECT_TRUE(std::any_of(jobs.begin(), jobs.end(), [](const auto& job) {
    return job.job() == "C" && job.uid() == 1002u;
  })) << "the refused credential left the connection its kernel's user";
}

TEST(Service, Strategy2aStagesTheSecomComerAndPushesChanges) {
  Harness h(config("2a"));
  h.connect(1);
  h.connect(2);
  h.call(1, registration("A"));
  h.call(2, registration("B"));
  EXPECT_FALSE(h.stages(h.call(1, phase_begin())));
  EXPECT_TRUE(h.stages(h.call(2, phase_begin()))) << "B stages: A is writing";
  const Envelope asked = h.call(2, flush_request());
  EXPECT_FALSE(asked.directive().flush_allowed()) << "stage and block";
  h.pushes.clear();
  h.call(1, phase_end());
  ASSERT_EQ(h.pushes.size(), 1u) << "B is told at once";
  EXPECT_EQ(h.pushes[0].to, 2u);
  EXPECT_EQ(h.pushes[0].message.seq(), 0u) << "pushes carry seq 0";
  EXPECT_TRUE(h.pushes[0].message.directive().flush_allowed());
  EXPECT_GT(h.pushes[0].message.directive().epoch(), 0u);
}

TEST(Service, AJobIsInItsPhaseWhileAnyOfItsProcessesIs) {
  Harness h(config("2a"));
  for (ConnectionId id : {1, 2, 3}) h.connect(id);
  h.call(1, registration("A"));
  h.call(2, registration("A"));
  h.call(3, registration("B"));
  h.call(1, phase_begin());
  h.call(2, phase_begin());
  EXPECT_TRUE(h.stages(h.call(3, phase_begin())));
  h.call(1, phase_end());
  EXPECT_TRUE(h.stages(h.call(3, phase_begin()))) << "A's second process still writes";
  h.call(2, phase_end());
  EXPECT_FALSE(h.stages(h.call(3, phase_begin()))) << "A is done: B writes";
}

TEST(Service, ADeadProcessReleasesItsJobAndAReRegistrationRestoresState) {
  Harness h(config("2a"));
  h.connect(1);
  h.connect(2);
  h.call(1, registration("A"));
  h.call(2, registration("B"));
  h.call(1, phase_begin());
  EXPECT_TRUE(h.stages(h.call(2, phase_begin())));
  std::vector<Outgoing> out;
  h.service.on_disconnect(1, 1, out);
  EXPECT_EQ(h.service.job_count(), 1u) << "A ended with its only process";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.directive().mode(), harmonia::control::MODE_WRITE_THROUGH);
  // A restarted daemon: B comes back mid-phase, A too; A joined the line first this time.
  Harness fresh(config("2a"));
  fresh.connect(5);
  fresh.connect(6);
  EXPECT_FALSE(fresh.stages(fresh.call(6, registration("B", true))));
  EXPECT_TRUE(fresh.stages(fresh.call(5, registration("A", true))));
}

TEST(Service, SilentProcessesLoseTheirLease) {
  Harness h(config("2a", 2.0));
  h.connect(1);
  h.connect(2);
  h.call(1, registration("A"));
  h.call(2, registration("B"));
  h.now = 1.5;
  h.call(2, Envelope(phase_begin()));  // B speaks; A stays silent
  std::vector<Outgoing> out;
  EXPECT_TRUE(h.service.on_tick(1.9, out).empty());
  const auto dropped = h.service.on_tick(2.5, out);
  EXPECT_EQ(dropped, (std::vector<ConnectionId>{1}));
  EXPECT_EQ(h.service.job_count(), 1u);
}

TEST(Service, StatusListsJobsInOrder) {
  Harness h(config("3a"));
  for (ConnectionId id : {1, 2}) h.connect(id);
  h.call(2, registration("b-job"));
  h.call(1, registration("a-job"));
  h.call(1, phase_begin());
  Envelope request;
  request.mutable_status_request();
  const Envelope reply = h.call(1, request);
  ASSERT_TRUE(reply.has_status());
  const auto& status = reply.status();
  EXPECT_EQ(status.strategy(), "3a");
  ASSERT_EQ(status.jobs_size(), 2);
  EXPECT_EQ(status.jobs(0).job(), "a-job");
  EXPECT_EQ(status.jobs(0).in_phase(), 1u);
  EXPECT_EQ(status.jobs(0).phases(), 1u);
  EXPECT_EQ(status.jobs(0).directive().servers_size() + status.jobs(1).directive().servers_size(),
            8)
      << "3a splits the 8 servers";
}

namespace {

Envelope settle_file(const std::string& path) {
  Envelope e;
  e.mutable_settle_file()->set_path(path);
  e.mutable_settle_file()->set_device(7);
  e.mutable_settle_file()->set_inode(42);
  e.mutable_settle_file()->set_host("h");
  return e;
}

Envelope settle_done(std::uint64_t id) {
  Envelope e;
  e.mutable_settle_done()->set_id(id);
  return e;
}

/// The SettleOrder pushes among `pushes`, by destination.
std::map<ConnectionId, std::uint64_t> orders(const std::vector<Outgoing>& pushes) {
  std::map<ConnectionId, std::uint64_t> out;
  for (const auto& p : pushes)
    if (p.message.has_settle_order()) {
      EXPECT_EQ(p.message.settle_order().file().path(), "/pfs/out");
      EXPECT_EQ(p.message.settle_order().file().inode(), 42u);
      out[p.to] = p.message.settle_order().id();
    }
  return out;
}

std::vector<Envelope> completions(const std::vector<Outgoing>& pushes, ConnectionId to) {
  std::vector<Envelope> out;
  for (const auto& p : pushes)
    if (p.to == to && p.message.has_settle_complete()) out.push_back(p.message);
  return out;
}

}  // namespace

TEST(Service, ASettleAsksEveryOtherProcessAndCompletesWhenAllAnswered) {
  Harness h(config("none"));
  for (ConnectionId id : {1, 2, 3}) h.join(id, id == 3 ? "B" : "A");
  h.connect(4);  // a tool, not registered: not asked
  const Envelope started = h.call(1, settle_file("/pfs/out"));
  ASSERT_TRUE(started.has_settle_started());
  EXPECT_EQ(started.settle_started().waiting(), 2u);
  const auto asked = orders(h.pushes);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_TRUE(asked.count(2) && asked.count(3)) << "every other process, of any job";
  const std::uint64_t id = started.settle_started().id();
  h.pushes.clear();
  h.call(2, settle_done(id));
  EXPECT_TRUE(completions(h.pushes, 1).empty()) << "process 3 has not answered yet";
  h.call(3, settle_done(id));
  const auto done = completions(h.pushes, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].settle_complete().id(), id);
  EXPECT_TRUE(done[0].settle_complete().complete());
}

TEST(Service, ASettleCompletesWithoutASilentProcessOnceItsWaitHasPassed) {
  Harness h(config("none"));
  for (ConnectionId id : {1, 2, 3}) h.join(id, "J" + std::to_string(id));
  const std::uint64_t id = h.call(1, settle_file("/pfs/out")).settle_started().id();
  std::vector<Outgoing> out;
  h.service.on_disconnect(2, h.now, out);  // gone: nothing to wait for from it
  EXPECT_TRUE(completions(out, 1).empty());
  h.now = 1.0;
  out.clear();
  (void)h.service.on_tick(h.now, out);
  EXPECT_TRUE(completions(out, 1).empty()) << "process 3 still has time";
  h.now = 2.5;
  out.clear();
  (void)h.service.on_tick(h.now, out);
  const auto done = completions(out, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].settle_complete().id(), id);
  EXPECT_FALSE(done[0].settle_complete().complete());
}

TEST(Service, AProcessThatLeavesIsNotWaitedForByASettle) {
  Harness h(config("none"));
  for (ConnectionId id : {1, 2, 3}) h.join(id, "J" + std::to_string(id));
  const std::uint64_t id = h.call(1, settle_file("/pfs/out")).settle_started().id();
  h.call(2, settle_done(id));
  h.pushes.clear();
  Envelope unregister;
  unregister.mutable_unregister();
  h.call(3, unregister);  // it wrote out what it staged, and leaves
  const auto done = completions(h.pushes, 1);
  ASSERT_EQ(done.size(), 1u) << "completed at the leave, not at the settle's wait";
  EXPECT_EQ(done[0].settle_complete().id(), id);
  EXPECT_TRUE(done[0].settle_complete().complete());
}

TEST(Service, ASettleWithNobodyElseCompletesAtOnceAndBadOnesAreRefused) {
  Harness h(config("none"));
  h.connect(1);
  h.call(1, registration("A"));
  const Envelope alone = h.call(1, settle_file("/pfs/out"));
  EXPECT_EQ(alone.settle_started().waiting(), 0u);
  EXPECT_TRUE(h.pushes.empty());
  EXPECT_EQ(h.call(1, settle_file("")).error().code(), Error::CODE_INVALID);
  h.connect(2);
  EXPECT_EQ(h.call(2, settle_file("/pfs/out")).error().code(), Error::CODE_NOT_REGISTERED);
}

TEST(Service, OpenersOfAFileBeingSettledJoinTheSettleInsteadOfAskingAgain) {
  Harness h(config("none"));
  for (ConnectionId id : {1, 2, 3}) h.join(id, "A");
  const std::uint64_t id = h.call(1, settle_file("/pfs/out")).settle_started().id();
  EXPECT_EQ(orders(h.pushes).size(), 2u);
  h.pushes.clear();
  const Envelope joined = h.call(2, settle_file("/pfs/out"));
  EXPECT_EQ(joined.settle_started().id(), id);
  EXPECT_TRUE(orders(h.pushes).empty()) << "no second round of orders";
  h.call(2, settle_done(id));
  h.call(3, settle_done(id));
  EXPECT_EQ(completions(h.pushes, 1).size(), 1u);
  EXPECT_EQ(completions(h.pushes, 2).size(), 1u) << "the one that joined hears it too";
}

TEST(Service, AJobDeclaringMoreRanksThanTheSiteAllowsIsRefused) {
  ServiceConfig c = config("none");
  c.max_ranks = 64;
  Harness h(c);
  h.connect(1);
  Envelope e = registration("A");
  e.mutable_register_process()->set_ranks(4294967295u);
  const Envelope refused = h.call(1, e);
  ASSERT_TRUE(refused.has_error());
  EXPECT_EQ(refused.error().code(), Error::CODE_INVALID);
  EXPECT_NE(refused.error().message().find("--max-ranks"), std::string::npos);
  e.mutable_register_process()->set_ranks(64);
  EXPECT_TRUE(h.call(1, e).has_registered());
}

TEST(Service, ANodeAgentGetsTheSettleOrdersOfFilesItsOwnRanksOpen) {
  Harness h(config("none"));
  h.connect(1);
  Envelope agent = registration("A");
  agent.mutable_register_process()->set_node_agent(true);
  h.call(1, agent);
  h.connect(2);
  h.call(2, registration("A"));
  // Its other ranks may stage the file: the agent is asked too, and fans the order out.
  const Envelope started = h.call(1, settle_file("/pfs/out"));
  EXPECT_EQ(started.settle_started().waiting(), 2u);
  const auto asked = orders(h.pushes);
  EXPECT_TRUE(asked.count(1) && asked.count(2));
  // A plain process opening the file is not asked about its own.
  h.pushes.clear();
  const Envelope plain = h.call(2, settle_file("/pfs/other"));
  EXPECT_EQ(plain.settle_started().waiting(), 1u);
}

TEST(Service, StatusCountsTheMessagesItPushed) {
  Harness h(config("2a"));
  for (ConnectionId id : {1, 2, 3}) h.join(id, id == 1 ? "A" : "B");
  h.call(1, phase_begin());
  h.call(2, phase_begin());  // B is second under 2a: its other process gets the directive
  const size_t pushed = h.pushes.size();  // every message but the replies, since the start
  ASSERT_GT(pushed, 0u);
  Envelope request;
  request.mutable_status_request();
  const Envelope status = h.call(1, request);
  EXPECT_EQ(status.status().pushes(), pushed);
  EXPECT_EQ(status.status().requests(), 6u);
}
