// The scheduler daemon's burst-buffer side: jobs, buffer nodes' monitors and the policy core,
// driven through the service as the server would drive it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "schedd/service.hpp"

using namespace harmonia::schedd;
using harmonia::control::DrainOrder;
using harmonia::control::Envelope;
using harmonia::control::Error;

namespace {

constexpr double kMiB = 1 << 20;

ServiceConfig buffered(const std::string& policy, int nodes, double capacity) {
  ServiceConfig c;
  BufferConfig b;
  b.policy = policy;
  b.count = nodes;
  b.capacity = capacity;
  b.phase_bytes = 16 * kMiB;
  b.flush_threshold = 0.5;
  b.max_phase_share = 1.0;  // every buffer: the tests' phases are the policy's to place
  c.buffers = b;
  return c;
}

struct Harness {
  explicit Harness(ServiceConfig c) : service(std::move(c), 0) {}
  Service service;
  double now = 0;
  std::vector<Outgoing> pushes;
  bool tool_connected = false;

  Envelope call(ConnectionId id, Envelope request) {
    request.set_seq(5);
    std::vector<Outgoing> out;
    service.on_message(id, request, now, out);
    EXPECT_FALSE(out.empty());
    Envelope reply = out.front().message;
    pushes.insert(pushes.end(), out.begin() + 1, out.end());
    return reply;
  }
  void node(ConnectionId id, const std::string& address) {
    service.on_connect(id, 0, now);  // nodes run as root
    Envelope e;
    e.mutable_register_buffer()->set_protocol_version(1);
    e.mutable_register_buffer()->set_address(address);
    e.mutable_register_buffer()->set_capacity(1 << 30);
    ASSERT_TRUE(call(id, e).has_buffer_registered());
  }
  uid_t uid = 1000;  ///< the jobs' user
  /// What tags the data of this user's job `key` on the nodes (the daemon's key, per user).
  std::string tag(const std::string& key) const { return std::to_string(uid) + "/" + key; }
  harmonia::control::Directive job(ConnectionId id, const std::string& key,
                                   double bytes_per_process = 0, bool cached = false) {
    service.on_connect(id, uid, now);
    Envelope e;
    auto* r = e.mutable_register_process();
    r->set_protocol_version(1);
    r->set_job(key);
    r->set_ranks(1);
    r->set_bytes_per_process(bytes_per_process);
    r->set_cached(cached);
    return call(id, e).registered().directive();
  }
  harmonia::control::Directive begin(ConnectionId id, double bytes) {
    Envelope e;
    e.mutable_phase_begin()->set_expected_bytes(static_cast<std::uint64_t>(bytes));
    return call(id, e).directive();
  }
  harmonia::control::Directive end(ConnectionId id) {
    Envelope e;
    e.mutable_phase_end();
    return call(id, e).directive();
  }
  /// A node's report: `held` is (job, bytes) of what it holds; `drained` bytes, since it
  /// started, were all `drained_job`'s.
  DrainOrder report(ConnectionId node, std::uint64_t used, std::uint64_t drained,
                    const std::vector<std::pair<std::string, std::uint64_t>>& held,
                    std::uint64_t acted_epoch, const std::string& drained_job = "") {
    Envelope e;
    auto* r = e.mutable_buffer_report();
    r->set_capacity(1 << 30);
    r->set_used(used);
    r->set_drained_bytes(drained);
    if (drained > 0) {
      auto* d = r->add_drained();
      d->set_job(drained_job);
      d->set_bytes(drained);
    }
    for (const auto& [job, bytes] : held) {
      auto* h = r->add_held();
      h->set_job(job);
      h->set_bytes(bytes);
    }
    r->set_order_epoch(acted_epoch);
    return call(node, e).drain_order();
  }
  /// Connection `id` closes now; what the daemon pushes to the others is kept.
  void disconnect(ConnectionId id) {
    std::vector<Outgoing> out;
    service.on_disconnect(id, now, out);
    pushes.insert(pushes.end(), out.begin(), out.end());
  }
  /// The last directive pushed to `id`.
  std::optional<harmonia::control::Directive> pushed(ConnectionId id) const {
    for (auto it = pushes.rbegin(); it != pushes.rend(); ++it)
      if (it->to == id && it->message.has_directive()) return it->message.directive();
    return std::nullopt;
  }
  harmonia::control::Status status() {
    if (!tool_connected) service.on_connect(99, 1000, now);
    tool_connected = true;
    Envelope e;
    e.mutable_status_request();
    return call(99, e).status();
  }
};

}  // namespace

TEST(Buffers, BadSettingsAreRefusedByName) {
  auto c = buffered("max-bandwidth", 2, 0);
  EXPECT_THROW(Service(c, 0), std::invalid_argument);
  c = buffered("no-such-policy", 2, 64 * kMiB);
  EXPECT_THROW(Service(c, 0), std::invalid_argument);
  c = buffered("max-bandwidth", 2, 64 * kMiB);
  c.buffers->stripe_bytes = 100;
  EXPECT_THROW(Service(c, 0), std::invalid_argument);
}

TEST(Buffers, NodesKeepTheirSlotAcrossRestartsAndExtraNodesAreRefused) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  h.service.on_connect(2, 0, 0);
  Envelope e;
  e.mutable_register_buffer()->set_protocol_version(1);
  e.mutable_register_buffer()->set_address("n1:7100");
  EXPECT_TRUE(h.call(2, e).has_error()) << "one slot, taken by n0";
  std::vector<Outgoing> out;
  h.service.on_disconnect(1, 0, out);
  EXPECT_FALSE(h.status().buffers(0).connected());
  h.node(3, "n0:7100");
  EXPECT_TRUE(h.status().buffers(0).connected());
}

TEST(Buffers, APhaseWaitsForItsGrantAndGetsStripedNodes) {
  Harness h(buffered("max-bandwidth", 2, 64 * kMiB));
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  const auto registered = h.job(10, "a");
  EXPECT_TRUE(registered.buffer_mode());
  EXPECT_EQ(registered.job(), h.tag("a"));
  EXPECT_EQ(registered.buffers_size(), 0) << "no phase yet: nothing granted";
  const auto granted = h.begin(10, 32 * kMiB);
  EXPECT_FALSE(granted.await_grant());
  ASSERT_GE(granted.buffers_size(), 1);
  for (const auto& node : granted.buffers()) EXPECT_TRUE(node == "n0:7100" || node == "n1:7100");
  EXPECT_EQ(granted.stripe_bytes(), 1u << 20);
  const auto after = h.end(10);
  EXPECT_EQ(after.buffers_size(), 0) << "out of its phase, a job writes to the PFS";
}

TEST(Buffers, APhaseEndedBeforeItsGrantIsCompletedWhenGrantedAndNamesNoNodes) {
  // A job's processes left a phase the policy had not placed yet (no room): the policy still
  // grants it later, the daemon completes it at once, and the job, out of any phase, is never
  // sent nodes for it; its next phase gets its own grant.
  auto c = buffered("max-bandwidth", 1, 64 * kMiB);
  c.buffers->flush_threshold = 1.0;
  Harness h(c);
  h.node(1, "n0:7100");
  h.job(10, "a");
  h.job(11, "b");
  ASSERT_EQ(h.begin(10, 64 * kMiB).buffers_size(), 1);
  EXPECT_TRUE(h.begin(11, 32 * kMiB).await_grant()) << "the node is full";
  const auto left = h.end(11);
  EXPECT_FALSE(left.await_grant());
  EXPECT_EQ(left.buffers_size(), 0);
  h.end(10);
  h.disconnect(10);  // "a" ends: its data drains, room for b's phase
  const std::uint64_t epoch = h.report(1, 64 * kMiB, 0, {{h.tag("a"), 64 * kMiB}}, 0).epoch();
  h.now = 1;
  const DrainOrder order = h.report(1, 64 * kMiB, 0, {{h.tag("a"), 64 * kMiB}}, epoch);
  ASSERT_TRUE(order.drain());
  h.now = 2;
  const DrainOrder drained = h.report(1, 0, 64 * kMiB, {}, order.epoch(), h.tag("a"));
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 32 * kMiB, 1)
      << "b's phase was granted: its reservation counts until the node reports on it";
  EXPECT_EQ(h.status().buffers(0).phases(), 0u) << "and completed at once";
  Envelope beat;
  beat.mutable_heartbeat();
  const auto idle = h.call(11, beat).directive();
  EXPECT_EQ(idle.buffers_size(), 0) << "no nodes for a phase that has ended";
  EXPECT_FALSE(idle.await_grant());
  h.report(1, 0, 64 * kMiB, {}, drained.epoch(), h.tag("a"));
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 0, 1) << "the node holds nothing of b";
  const auto next = h.begin(11, 16 * kMiB);
  EXPECT_FALSE(next.await_grant());
  EXPECT_EQ(next.buffers_size(), 1) << "the next phase is granted on its own";
  EXPECT_EQ(h.status().buffers(0).phases(), 1u);
  EXPECT_EQ(h.end(11).buffers_size(), 0);
  EXPECT_EQ(h.status().buffers(0).phases(), 0u);
}

TEST(Buffers, AGrantToANodeThatIsGoneIsNotHandedOut) {
  Harness h(buffered("datawarp", 2, 64 * kMiB));
  h.node(1, "n0:7100");  // slot 1 never registers
  const auto d = h.begin((h.job(10, "a"), 10), 8 * kMiB);
  ASSERT_EQ(d.buffers_size(), 1) << "DataWarp stripes over every slot, but only n0 is there";
  EXPECT_EQ(d.buffers(0), "n0:7100");
}

TEST(Buffers, DataWarpExtensionsAreAccountedWhenEnabled) {
  // 128 MiB of buffers; "small" reserves 32 MiB, then writes 100 MiB in one phase.
  for (const bool extend : {false, true}) {
    auto c = buffered("datawarp", 2, 64 * kMiB);
    c.buffers->extend_reservations = extend;
    Harness h(std::move(c));
    h.node(1, "n0:7100");
    h.node(2, "n1:7100");
    h.job(10, "small", 32 * kMiB);
    EXPECT_FALSE(h.begin(10, 100 * kMiB).await_grant()) << "the job goes on past its reservation";
    h.job(11, "next", 64 * kMiB);
    // With the 68 MiB extension counted, 100 + 64 MiB exceed the pool: "next" is queued; without
    // it, only 32 MiB are reserved and its 16 MiB phase fits in the 28 MiB left.
    EXPECT_EQ(h.begin(11, 16 * kMiB).await_grant(), extend) << "extend_reservations=" << extend;
  }
}

TEST(Buffers, DataWarpQueuesJobsWhoseReservationDoesNotFit) {
  Harness h(buffered("datawarp", 2, 64 * kMiB));
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "big", 100 * kMiB);  // reserves 100 of 128 MiB
  h.job(11, "second", 64 * kMiB);
  EXPECT_FALSE(h.begin(10, 100 * kMiB).await_grant());
  const auto waiting = h.begin(11, 64 * kMiB);
  EXPECT_TRUE(waiting.await_grant()) << "its reservation waits for the first job's stage-out";
  EXPECT_EQ(waiting.buffers_size(), 0);
  h.end(10);
  h.now = 1;
  const DrainOrder before_end = h.report(1, 50 * kMiB, 0, {{h.tag("big"), 50 * kMiB}}, 1);
  EXPECT_FALSE(before_end.drain()) << "DataWarp stages out only when the job ends";
  h.disconnect(10);  // the job ends: stage-out
  const DrainOrder order = h.report(1, 50 * kMiB, 0, {{h.tag("big"), 50 * kMiB}}, 0);
  EXPECT_TRUE(order.drain());
  ASSERT_EQ(order.jobs_size(), 1);
  EXPECT_EQ(order.jobs(0), h.tag("big"));
  EXPECT_FALSE(h.pushed(11) && !h.pushed(11)->await_grant()) << "still queued mid stage-out";
  // Both nodes drain all they hold of the job: the reservation is freed, the second job runs.
  h.now = 2;
  h.report(1, 0, 50 * kMiB, {}, order.epoch(), h.tag("big"));
  const DrainOrder second = h.report(2, 0, 50 * kMiB, {}, order.epoch(), h.tag("big"));
  (void)second;
  ASSERT_TRUE(h.pushed(11).has_value());
  EXPECT_FALSE(h.pushed(11)->await_grant());
  EXPECT_EQ(h.pushed(11)->buffers_size(), 2);
  const auto status = h.status();
  const auto job = std::find_if(status.jobs().begin(), status.jobs().end(),
                                [](const auto& j) { return j.job() == "second"; });
  ASSERT_NE(job, status.jobs().end());
  EXPECT_NEAR(job->wait_seconds(), 2.0, 1e-9) << "admission wait, from registration at 0 to 2";
}

TEST(Buffers, DrainedBytesAreAccountedAndAnEmptyNodeSettlesThePolicysEstimate) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  h.job(10, "a");
  h.begin(10, 40 * kMiB);  // over the 50 % threshold
  h.end(10);
  const DrainOrder order = h.report(1, 30 * kMiB, 0, {{h.tag("a"), 30 * kMiB}}, 0);
  ASSERT_TRUE(order.drain());
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 40 * kMiB, 1);
  const DrainOrder below =
      h.report(1, 20 * kMiB, 10 * kMiB, {{h.tag("a"), 20 * kMiB}}, 0, h.tag("a"));
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 30 * kMiB, 1) << "10 MiB drained";
  EXPECT_FALSE(below.drain()) << "below the threshold again";
  // The job really wrote 30 MiB, not the 40 it declared: once the node, having seen the latest
  // order, holds nothing of it, the rest of the estimate is free too.
  const DrainOrder done = h.report(1, 0, 30 * kMiB, {}, below.epoch(), h.tag("a"));
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 0, 1);
  EXPECT_FALSE(done.drain());
}

TEST(Buffers, AStaleReportDoesNotSettleANewerOrder) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  h.job(10, "a");
  h.begin(10, 40 * kMiB);
  h.end(10);
  const DrainOrder order = h.report(1, 40 * kMiB, 0, {{h.tag("a"), 40 * kMiB}}, 0);
  ASSERT_TRUE(order.drain());
  // A report from before the node took the order: it holds nothing of "a" yet in its view.
  h.report(1, 0, 0, {}, order.epoch() - 1);
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 40 * kMiB, 1);
}

TEST(Buffers, ReportsBeforeRegistrationAreRefused) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.service.on_connect(1, std::nullopt, 0);
  Envelope e;
  e.mutable_buffer_report();
  EXPECT_TRUE(h.call(1, e).has_error());
}

TEST(Buffers, ANodeHoldingMoreThanItsShareDrainsItAll) {
  // The stall seen with kill -9: a client whose node died wrote the whole phase to the other
  // node; the policy counted half there, drained that half and stopped.
  auto c = buffered("max-bandwidth", 2, 64 * kMiB);
  c.buffers->flush_threshold = 1.0;
  Harness h(c);
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "a");
  ASSERT_EQ(h.begin(10, 16 * kMiB).buffers_size(), 2);
  h.end(10);
  h.disconnect(10);  // the job ends: everything drains
  const std::uint64_t epoch = h.report(1, 16 * kMiB, 0, {{h.tag("a"), 16 * kMiB}}, 0).epoch();
  const DrainOrder order = h.report(1, 16 * kMiB, 0, {{h.tag("a"), 16 * kMiB}}, epoch);
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 16 * kMiB, 1) << "the node's count";
  ASSERT_TRUE(order.drain());
  const DrainOrder half =
      h.report(1, 8 * kMiB, 8 * kMiB, {{h.tag("a"), 8 * kMiB}}, order.epoch(), h.tag("a"));
  EXPECT_TRUE(half.drain()) << "8 MiB more to go, although 8 MiB was the policy's estimate";
  EXPECT_EQ(half.jobs(0), h.tag("a"));
  const DrainOrder done = h.report(1, 0, 16 * kMiB, {}, half.epoch(), h.tag("a"));
  EXPECT_FALSE(done.drain());
  EXPECT_NEAR(h.status().buffers(0).scheduled_used(), 0, 1);
}

TEST(Buffers, DataOfJobsTheSchedulerDoesNotKnowDrains) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  // Written before this daemon started (it was restarted): no job of that key is registered.
  const std::uint64_t epoch = h.report(1, 4 * kMiB, 0, {}, 0).epoch();
  const DrainOrder order = h.report(1, 4 * kMiB, 0, {{"old-job", 4 * kMiB}}, epoch);
  ASSERT_TRUE(order.drain());
  ASSERT_EQ(order.jobs_size(), 1);
  EXPECT_EQ(order.jobs(0), "old-job");
  EXPECT_FALSE(h.report(1, 0, 4 * kMiB, {}, order.epoch(), "old-job").drain());
}

TEST(Buffers, ACachedJobsDataStaysOnTheNodesUntilItEnds) {
  auto c = buffered("max-bandwidth", 1, 64 * kMiB);
  c.buffers->flush_threshold = 0.0;  // drain as soon as anything is drainable
  for (const bool cached : {false, true}) {
    Harness h(c);
    h.node(1, "n0:7100");
    h.job(10, "job", 0, cached);
    h.begin(10, 8 * kMiB);
    h.end(10);
    const std::uint64_t epoch = h.report(1, 8 * kMiB, 0, {{h.tag("job"), 8 * kMiB}}, 0).epoch();
    const DrainOrder order = h.report(1, 8 * kMiB, 0, {{h.tag("job"), 8 * kMiB}}, epoch);
    EXPECT_EQ(order.drain(), !cached) << "a cached job's data stays for its reads";
    std::vector<Outgoing> out;
    h.service.on_disconnect(10, h.now, out);  // the job ends: its data goes
    const DrainOrder after = h.report(1, 8 * kMiB, 0, {{h.tag("job"), 8 * kMiB}}, order.epoch());
    ASSERT_TRUE(after.drain());
    EXPECT_EQ(after.jobs(0), h.tag("job"));
  }
}

namespace {

Envelope register_buffer(const std::string& address) {
  Envelope e;
  e.mutable_register_buffer()->set_protocol_version(1);
  e.mutable_register_buffer()->set_address(address);
  e.mutable_register_buffer()->set_capacity(1 << 30);
  return e;
}

}  // namespace

TEST(Buffers, OnlyRootOrANamedNodeUserRegistersANode) {
  ServiceConfig c = buffered("max-bandwidth", 2, 64 * kMiB);
  c.node_uids = {4242};
  Harness h(c);
  h.service.on_connect(1, 1000, 0);  // a user: refused, whatever the address
  const Envelope user = h.call(1, register_buffer("n0:7100"));
  ASSERT_TRUE(user.has_error());
  EXPECT_EQ(user.error().code(), Error::CODE_FORBIDDEN);
  EXPECT_NE(user.error().message().find("uid 1000"), std::string::npos);
  h.service.on_connect(2, std::nullopt, 0);  // a peer on another host, not authenticated
  const Envelope tcp = h.call(2, register_buffer("n0:7100"));
  ASSERT_TRUE(tcp.has_error());
  EXPECT_EQ(tcp.error().code(), Error::CODE_UNAUTHENTICATED);
  EXPECT_FALSE(h.status().buffers(0).connected()) << "no slot was taken";
  h.service.on_connect(3, 4242, 0);  // the site's node account
  EXPECT_TRUE(h.call(3, register_buffer("n0:7100")).has_buffer_registered());
}

TEST(Buffers, AConnectedNodesAddressCannotBeTakenOver) {
  Harness h(buffered("max-bandwidth", 2, 64 * kMiB));
  h.node(1, "n0:7100");
  h.service.on_connect(2, 0, 0);
  const Envelope takeover = h.call(2, register_buffer("n0:7100"));
  ASSERT_TRUE(takeover.has_error());
  EXPECT_EQ(takeover.error().code(), Error::CODE_FORBIDDEN);
  std::vector<Outgoing> out;
  h.service.on_disconnect(2, 0, out);  // the impostor leaves: the real node stays connected
  EXPECT_TRUE(h.status().buffers(0).connected());
  h.service.on_disconnect(1, 0, out);  // the real node restarts: it gets its slot back
  h.node(3, "n0:7100");
  EXPECT_TRUE(h.status().buffers(0).connected());
}

TEST(Buffers, AJobDeclaringEnormousPhasesReservesNoMoreThanTheSiteAllows) {
  // A job declaring 2^59 bytes a process: with every buffer its phase may ask for, DataWarp
  // reserves them all and the next job waits; by default (half of all buffers), or with
  // --max-phase-bytes 64 MiB, the next job fits beside it.
  struct Bound {
    double share, bytes;
    bool second_waits;
  };
  for (const Bound bound : {Bound{1.0, 0, true}, Bound{BufferConfig{}.max_phase_share, 0, false},
                            Bound{1.0, 64.0 * kMiB, false}}) {
    ServiceConfig c = buffered("datawarp", 2, 64 * kMiB);
    c.buffers->max_phase_share = bound.share;
    c.buffers->max_phase_bytes = bound.bytes;
    Harness h(c);
    h.node(1, "n0:7100");
    h.node(2, "n1:7100");
    h.job(10, "hog", std::ldexp(1.0, 59));
    h.job(11, "second", 32 * kMiB);
    EXPECT_FALSE(h.begin(10, std::ldexp(1.0, 59)).await_grant());
    EXPECT_EQ(h.begin(11, 32 * kMiB).await_grant(), bound.second_waits)
        << "share " << bound.share << ", bytes " << bound.bytes;
  }
}

TEST(Buffers, AdmissionLimitQueuesJobsUntilOneEnds) {
  // --max-running-apps 1: the second job's phase waits for the first job to end, not for
  // capacity (there is plenty), as the policy core's admission limit says.
  auto cfg = buffered("max-bandwidth", 2, 512 * kMiB);
  cfg.buffers->max_running_apps = 1;
  Harness h(cfg);
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "first", 8 * kMiB);
  h.job(11, "second", 8 * kMiB);
  EXPECT_FALSE(h.begin(10, 8 * kMiB).await_grant());
  EXPECT_TRUE(h.begin(11, 8 * kMiB).await_grant()) << "one job at a time";
  h.end(10);
  h.now = 1;
  EXPECT_FALSE(h.pushed(11).has_value()) << "the first job's phase ended, not the job";
  h.disconnect(10);
  ASSERT_TRUE(h.pushed(11).has_value());
  EXPECT_FALSE(h.pushed(11)->await_grant());
}

TEST(Buffers, PeerPoliciesRunInTheDaemonLikeHarmoniasOwn) {
  // The peers (docs/scheduling-model.md section 8) are chosen by name like the paper's policies:
  // a phase alone is granted at once; a second one is granted now or when the first ends.
  for (const std::string policy :
       {"fair-share", "io-sets", "themisio-job", "themisio-user", "themisio-size", "slurm-easy"}) {
    Harness h(buffered(policy, 2, 64 * kMiB));
    h.node(1, "n0:7100");
    h.node(2, "n1:7100");
    h.job(10, "a");
    h.job(11, "b");
    const auto first = h.begin(10, 8 * kMiB);
    EXPECT_FALSE(first.await_grant()) << policy;
    EXPECT_GE(first.buffers_size(), 1) << policy;
    h.now = 1;
    const auto second = h.begin(11, 8 * kMiB);
    if (second.await_grant()) {
      h.now = 2;
      h.end(10);
      ASSERT_TRUE(h.pushed(11).has_value()) << policy;
      EXPECT_FALSE(h.pushed(11)->await_grant()) << policy;
      EXPECT_GE(h.pushed(11)->buffers_size(), 1) << policy;
    } else {
      EXPECT_GE(second.buffers_size(), 1) << policy;
    }
  }
}

// Read phases in the daemon (issue 16 item 1; docs/buffer-nodes.md, "Read phases"): an announced
// read is staged in by the nodes the policy places it on, and its read phase is granted on them
// once every node reported its copy.
namespace {

Envelope announce(const std::vector<std::pair<std::string, std::uint64_t>>& files) {
  Envelope e;
  for (const auto& [name, size] : files) {
    auto* f = e.mutable_announce_read()->add_files();
    f->set_file(name);
    f->set_size(size);
  }
  return e;
}

Envelope read_begin() {
  Envelope e;
  e.mutable_phase_begin()->set_read(true);
  return e;
}

/// A node's report that it finished `staged` (job, phase, failed files) and acted on `epoch`.
Envelope staged_report(std::uint64_t epoch, const harmonia::control::StageIn* staged,
                       const std::vector<std::string>& failed = {}) {
  Envelope e;
  auto* r = e.mutable_buffer_report();
  r->set_capacity(1 << 30);
  r->set_order_epoch(epoch);
  if (staged) {
    auto* s = r->add_staged_in();
    s->set_job(staged->job());
    s->set_phase(staged->phase());
    for (const auto& f : failed) s->add_failed(f);
  }
  return e;
}

}  // namespace

TEST(Buffers, AnAnnouncedReadIsStagedInStripedAndGrantedOnceEveryNodeHasIt) {
  Harness h(buffered("max-bandwidth", 2, 64 * kMiB));
  h.uid = 65534;  // nobody: whose rights the nodes copy with
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "job");
  const auto announced = h.call(10, announce({{"run/b.h5", 6 * kMiB}, {"run/a.h5", 2 * kMiB}}));
  ASSERT_TRUE(announced.has_directive()) << announced.DebugString();
  // Each node's order lists the stage-in: the same files, its own place in the stripes.
  std::map<std::uint32_t, std::string> by_place;
  std::vector<harmonia::control::StageIn> stages;
  for (ConnectionId node : {1, 2}) {
    const DrainOrder order = h.call(node, staged_report(0, nullptr)).drain_order();
    if (order.stage_in_size() == 0) continue;
    ASSERT_EQ(order.stage_in_size(), 1);
    const auto& s = order.stage_in(0);
    EXPECT_EQ(s.job(), h.tag("job"));
    EXPECT_EQ(s.uid(), 65534u);
    EXPECT_EQ(s.gid(), 65534u) << "the user's primary group, from the password database";
    EXPECT_EQ(std::vector<std::string>(s.files().begin(), s.files().end()),
              (std::vector<std::string>{"run/a.h5", "run/b.h5"}));
    EXPECT_EQ(s.stripe_bytes(), 1u << 20);
    by_place[s.stripe_index()] = node == 1 ? "n0:7100" : "n1:7100";
    stages.push_back(s);
  }
  ASSERT_FALSE(stages.empty()) << "the policy placed the prefetch at once (idle nodes)";
  for (const auto& s : stages) EXPECT_EQ(s.stripe_count(), stages.size());
  EXPECT_EQ(by_place.size(), stages.size()) << "each node has a place of its own";

  // The read begins before the copies are done: it waits for them.
  EXPECT_TRUE(h.call(10, read_begin()).directive().await_grant());
  // The first node's report alone does not grant it; the last one does. One file failed on one
  // node: it is read from the PFS.
  const ConnectionId first = by_place.begin()->second == "n0:7100" ? 1 : 2;
  h.call(first, staged_report(0, &stages.front(), {"run/b.h5"}));
  if (stages.size() == 2) {
    EXPECT_FALSE(h.pushed(10).has_value() && !h.pushed(10)->await_grant())
        << "one node still copies";
    h.call(first == 1 ? 2 : 1, staged_report(0, &stages.back()));
  }
  ASSERT_TRUE(h.pushed(10).has_value());
  const auto granted = *h.pushed(10);
  EXPECT_FALSE(granted.await_grant());
  ASSERT_EQ(static_cast<size_t>(granted.buffers_size()), by_place.size());
  for (const auto& [place, address] : by_place)
    EXPECT_EQ(granted.buffers(static_cast<int>(place)), address) << "in stripe order";
  EXPECT_EQ(std::vector<std::string>(granted.read_files().begin(), granted.read_files().end()),
            std::vector<std::string>{"run/a.h5"});

  // After the read the copies go: the orders list no stage-in any more.
  EXPECT_EQ(h.end(10).read_files_size(), 0);
  for (ConnectionId node : {1, 2})
    EXPECT_EQ(h.call(node, staged_report(0, nullptr)).drain_order().stage_in_size(), 0);
}

TEST(Buffers, EveryReplyCarriesTheGrantOnceAsPushed) {
  // A reply's directive was filled twice (by the request's handler and again after the policy
  // decided), doubling its lists: the library saw a new grant at its next heartbeat and stopped
  // serving the read phase's open files from the copies.
  Harness h(buffered("max-bandwidth", 2, 64 * kMiB));
  h.uid = 0;
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "job");
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  for (ConnectionId node : {1, 2}) {
    const DrainOrder order = h.call(node, staged_report(0, nullptr)).drain_order();
    for (const auto& s : order.stage_in()) h.call(node, staged_report(order.epoch(), &s));
  }
  const auto granted = h.call(10, read_begin()).directive();
  ASSERT_FALSE(granted.await_grant());
  ASSERT_EQ(granted.buffers_size(), 2);
  ASSERT_EQ(granted.read_files_size(), 1);
  Envelope beat;
  beat.mutable_heartbeat();
  const auto again = h.call(10, beat).directive();
  EXPECT_EQ(std::vector<std::string>(again.buffers().begin(), again.buffers().end()),
            std::vector<std::string>(granted.buffers().begin(), granted.buffers().end()));
  EXPECT_EQ(std::vector<std::string>(again.read_files().begin(), again.read_files().end()),
            std::vector<std::string>{"in.dat"});
  EXPECT_EQ(again.servers_size(), granted.servers_size());
}

TEST(Buffers, ACachedJobKeepsItsCopiesUntilItEnds) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.uid = 0;
  h.node(1, "n0:7100");
  h.job(10, "job", 0, true);
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  const DrainOrder order = h.call(1, staged_report(0, nullptr)).drain_order();
  ASSERT_EQ(order.stage_in_size(), 1);
  h.call(1, staged_report(order.epoch(), &order.stage_in(0)));
  const auto granted = h.call(10, read_begin()).directive();
  EXPECT_FALSE(granted.await_grant());
  EXPECT_EQ(granted.read_files_size(), 1);
  h.end(10);
  EXPECT_EQ(h.call(1, staged_report(order.epoch(), nullptr)).drain_order().stage_in_size(), 1)
      << "cached: its data stays for the job's next reads";
  std::vector<Outgoing> out;
  h.service.on_disconnect(10, h.now, out);
  EXPECT_EQ(h.call(1, staged_report(order.epoch(), nullptr)).drain_order().stage_in_size(), 0);
}

TEST(Buffers, AReadWithNothingAnnouncedOrAnnouncedAgainIsNoBufferPhase) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.uid = 0;
  h.node(1, "n0:7100");
  h.job(10, "job");
  const auto plain = h.call(10, read_begin()).directive();
  EXPECT_FALSE(plain.await_grant()) << "nothing announced: it reads the PFS at once";
  EXPECT_EQ(plain.buffers_size(), 0);
  h.end(10);
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  DrainOrder order = h.call(1, staged_report(0, nullptr)).drain_order();
  ASSERT_EQ(order.stage_in_size(), 1);
  // Another rank announces the same list, and another list while one is announced: one phase.
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  h.call(10, announce({{"other.dat", 4 * kMiB}}));
  order = h.call(1, staged_report(order.epoch(), &order.stage_in(0))).drain_order();
  ASSERT_EQ(order.stage_in_size(), 1);
  EXPECT_EQ(order.stage_in(0).files(0), "in.dat");
  EXPECT_EQ(h.call(10, read_begin()).directive().read_files_size(), 1);
  h.end(10);
  // The same list once more, after it was read (a rank that started late): not staged again.
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  EXPECT_EQ(h.call(1, staged_report(order.epoch(), nullptr)).drain_order().stage_in_size(), 0);
}

TEST(Buffers, ANodeLostDuringAStageInSendsTheReadToThePfs) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.uid = 0;
  h.node(1, "n0:7100");
  h.job(10, "job");
  h.call(10, announce({{"in.dat", 4 * kMiB}}));
  ASSERT_EQ(h.call(1, staged_report(0, nullptr)).drain_order().stage_in_size(), 1);
  EXPECT_TRUE(h.call(10, read_begin()).directive().await_grant());
  h.disconnect(1);
  ASSERT_TRUE(h.pushed(10).has_value());
  EXPECT_FALSE(h.pushed(10)->await_grant()) << "the read must not wait for a node that is gone";
  EXPECT_EQ(h.pushed(10)->read_files_size(), 0);
}

TEST(Buffers, AStageInALiveNodeNeverFinishesIsGivenUpAtItsDeadline) {
  // A node that keeps reporting but never finishes its copy (a hung PFS mount) must not hold
  // the read phase for ever. Its deadline is the grace plus its share of the bytes at the least
  // rate: 10 s + 4 MiB at 1 MiB/s = 14 s for a 4 MiB file, 10 s + 40 s = 50 s for 40 MiB.
  for (const double size : {4 * kMiB, 40 * kMiB}) {
    const double deadline = 10 + size / kMiB;
    auto config = buffered("max-bandwidth", 1, 256 * kMiB);
    config.buffers->stage_in_grace = 10;
    config.buffers->stage_in_min_rate = kMiB;
    Harness h(config);
    h.uid = 0;
    h.node(1, "n0:7100");
    h.job(10, "job");
    h.call(10, announce({{"in.dat", static_cast<std::uint64_t>(size)}}));
    ASSERT_EQ(h.call(1, staged_report(0, nullptr)).drain_order().stage_in_size(), 1);
    h.now = 1;
    EXPECT_TRUE(h.call(10, read_begin()).directive().await_grant());
    const auto granted = [&] {
      const auto pushed = h.pushed(10);
      return pushed.has_value() && !pushed->await_grant();
    };
    h.now = 13.9;
    h.call(1, staged_report(0, nullptr));
    EXPECT_FALSE(granted()) << size << ": before its deadline the read waits for the copy";
    h.now = deadline - 0.1;
    h.call(1, staged_report(0, nullptr));
    EXPECT_FALSE(granted()) << size << ": the deadline grows with the bytes";
    EXPECT_EQ(h.status().buffers(0).stage_ins_late(), 0u);
    h.now = deadline + 0.1;
    h.call(1, staged_report(0, nullptr));
    ASSERT_TRUE(granted()) << size << ": past its deadline the read goes on without the node";
    EXPECT_EQ(h.pushed(10)->read_files_size(), 0) << "its file is read from the PFS";
    EXPECT_EQ(h.status().buffers(0).stage_ins_late(), 1u);
  }
}

TEST(Buffers, BadAnnouncementsAreRefusedNamingTheFile) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.job(10, "job");
  for (const std::string bad : {"../etc/passwd", "/abs/path", "a//b", "a/./b", ""}) {
    const auto reply = h.call(10, announce({{"ok.dat", 1}, {bad, 1}}));
    ASSERT_TRUE(reply.has_error()) << bad;
    EXPECT_EQ(reply.error().code(), Error::CODE_INVALID);
    EXPECT_NE(reply.error().message().find("files[1]"), std::string::npos)
        << reply.error().message();
  }
  std::vector<std::pair<std::string, std::uint64_t>> many;
  for (int i = 0; i < 1025; ++i) many.emplace_back("f" + std::to_string(i), 1);
  EXPECT_TRUE(h.call(10, announce(many)).has_error());
}

TEST(Buffers, AReadDoesNotWaitForAStageInThePolicyHasNotPlaced) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.uid = 0;
  h.node(1, "n0:7100");
  h.job(10, "writer", 0, true);  // cached: its data stays on the node while it runs
  h.begin(10, 60 * kMiB);
  h.end(10);
  h.job(11, "reader");
  h.call(11, announce({{"in.dat", 16 * kMiB}}));
  EXPECT_EQ(h.call(1, staged_report(0, nullptr)).drain_order().stage_in_size(), 0)
      << "no room for the copy while the writer's data is there";
  const auto reading = h.call(11, read_begin()).directive();
  EXPECT_FALSE(reading.await_grant()) << "the PFS has the bytes: the read must not wait";
  EXPECT_EQ(reading.read_files_size(), 0);
}

namespace {

Envelope settle_file(std::uint64_t inode, bool stat_only, bool own = false,
                     const std::vector<std::string>& nodes = {}, double node_wait = 30) {
  Envelope e;
  auto* s = e.mutable_settle_file();
  s->set_path("run/out.dat");
  s->set_inode(inode);
  s->set_buffered(true);
  s->set_stat_only(stat_only);
  s->set_own(own);
  s->set_node_wait(node_wait);
  s->set_reason(own ? "fsync" : "");
  for (const auto& node : nodes) s->add_nodes(node);
  return e;
}

/// A node's report of the files it holds (inode, end) and those it released or drained first.
Envelope held_report(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& held,
                     const std::vector<std::uint64_t>& released,
                     const std::vector<std::uint64_t>& urgent_done = {}, bool complete = false) {
  Envelope e;
  auto* r = e.mutable_buffer_report();
  r->set_capacity(1 << 30);
  r->set_files_complete(complete);
  for (const auto& [inode, end] : held) {
    auto* f = r->add_files();
    f->set_inode(inode);
    f->set_name("run/out.dat");
    f->set_end(end);
    f->set_mtime_ns(1'700'000'000'000'000'000);
    f->set_uid(1000);
  }
  for (const auto inode : released) r->add_released(inode);
  for (const auto id : urgent_done) r->add_urgent_done(id);
  return e;
}

/// The SettleComplete pushed to `id`, if any.
std::optional<harmonia::control::SettleComplete> completed(const Harness& h, ConnectionId id) {
  for (const auto& out : h.pushes)
    if (out.to == id && out.message.has_settle_complete()) return out.message.settle_complete();
  return std::nullopt;
}

}  // namespace

TEST(Buffers, AStatSeesWhatTheNodesHoldAndAnOpenWaitsUntilTheyDrainedIt) {
  Harness h(buffered("max-bandwidth", 2, 64 * kMiB));
  h.node(1, "n0:7100");
  h.node(2, "n1:7100");
  h.job(10, "writer");
  h.job(11, "reader");
  // Two nodes hold stripes of inode 77; node 1's end is the file's size as written.
  h.call(1, held_report({{77, 3 << 20}}, {}));
  h.call(2, held_report({{77, 5 << 20}}, {}));
  const Envelope stat = h.call(11, settle_file(77, true));
  ASSERT_TRUE(stat.settle_started().held());
  EXPECT_EQ(stat.settle_started().held_size(), 5u << 20);
  EXPECT_EQ(stat.settle_started().waiting(), 0u) << "a stat orders nothing";
  // An open: both nodes are ordered to drain it first, and the opener waits for both.
  h.pushes.clear();
  const Envelope open = h.call(11, settle_file(77, false));
  ASSERT_TRUE(open.has_settle_started());
  const std::uint64_t settle = open.settle_started().id();
  std::map<ConnectionId, std::uint64_t> urgent_ids;
  for (const auto& out : h.pushes)
    if (out.message.has_drain_order())
      for (const auto& urgent : out.message.drain_order().urgent())
        if (urgent.inode() == 77) urgent_ids[out.to] = urgent.id();
  ASSERT_EQ(urgent_ids.size(), 2u) << "each node holding bytes got an urgent drain";
  // The writer's process is asked too (it may stage bytes of the file), and answers.
  Envelope answer;
  answer.mutable_settle_done()->set_id(settle);
  h.call(10, answer);
  h.pushes.clear();
  h.call(1, held_report({}, {77}));  // node 1 drained and released it
  EXPECT_FALSE(completed(h, 11)) << "node 2 still holds bytes";
  h.call(2, held_report({}, {}, {urgent_ids[2]}));  // node 2 dealt with its order
  const auto done = completed(h, 11);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->id(), settle);
  EXPECT_FALSE(done->unavailable());
  // Node 2 never said it released the file: until it does, a stat still shows its bytes.
  EXPECT_TRUE(h.call(11, settle_file(77, true)).settle_started().held());
  h.call(2, held_report({}, {}, {}, true));  // a complete report without it: gone
  EXPECT_FALSE(h.call(11, settle_file(77, true)).settle_started().held());
}

TEST(Buffers, AProcesssOwnDrainGoesThroughTheSchedulerAndIsCountedByReason) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  h.job(10, "writer");
  h.pushes.clear();
  // The node has not reported the file yet: the process names the node it wrote to.
  const Envelope own = h.call(10, settle_file(88, false, true, {"n0:7100"}));
  ASSERT_EQ(own.settle_started().waiting(), 1u) << "the node, and no process";
  std::uint64_t id = 0;
  for (const auto& out : h.pushes)
    if (out.to == 1 && out.message.has_drain_order())
      for (const auto& urgent : out.message.drain_order().urgent()) id = urgent.id();
  ASSERT_NE(id, 0u);
  h.call(1, held_report({}, {}, {id}));
  const auto done = completed(h, 10);
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->unavailable());
  bool counted = false;
  const auto status = h.status();
  for (const auto& count : status.urgent_drains())
    counted = counted || (count.reason() == "fsync" && count.count() == 1);
  EXPECT_TRUE(counted);
}

TEST(Buffers, ADrainOnANodeThatIsDownOrUnknownEndsUnavailableAtTheCallersWait) {
  Harness h(buffered("max-bandwidth", 1, 64 * kMiB));
  h.node(1, "n0:7100");
  h.job(10, "writer");
  std::vector<Outgoing> out;
  h.service.on_disconnect(1, h.now, out);  // the node died
  h.call(10, settle_file(99, false, true, {"n0:7100", "elsewhere:1"}, 2.0));
  h.service.on_tick(1.0, h.pushes);
  EXPECT_FALSE(completed(h, 10)) << "waited for within HARMONIA_NODE_WAIT";
  h.service.on_tick(2.5, h.pushes);
  const auto done = completed(h, 10);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->unavailable());
}
