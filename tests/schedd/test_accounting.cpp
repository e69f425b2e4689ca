// harmonia-schedd's side of discounted scheduling (docs/accounting.md): a job's io_qos from
// RegisterProcess, refused when unknown, and the accounting records of its jobs.
#include <gtest/gtest.h>

#include "schedd/service.hpp"

using namespace harmonia::schedd;
using harmonia::control::Envelope;
using harmonia::control::Error;

namespace {

Envelope register_process(const std::string& job, std::uint32_t ranks, const std::string& io_qos) {
  Envelope e;
  e.set_seq(1);
  auto* r = e.mutable_register_process();
  r->set_protocol_version(1);
  r->set_job(job);
  r->set_ranks(ranks);
  r->set_io_qos(io_qos);
  return e;
}

Envelope reply_to(Service& service, ConnectionId id, const Envelope& request, double now) {
  service.on_connect(id, 1000, now);
  std::vector<Outgoing> out;
  service.on_message(id, request, now, out);
  EXPECT_FALSE(out.empty());
  return out.front().message;
}

ServiceConfig with_buffers() {
  ServiceConfig c;
  BufferConfig b;
  b.count = 2;
  b.capacity = 1 << 30;
  b.pricing.node_hour_rate = 2;
  c.buffers = b;
  return c;
}

}  // namespace

TEST(ScheddAccounting, RecordsEachJobWithItsClassKeyAndRanks) {
  Service service(with_buffers(), 100);
  ASSERT_TRUE(
      reply_to(service, 1, register_process("slurm-7", 16, "relaxed"), 110).has_registered());
  ASSERT_TRUE(reply_to(service, 2, register_process("slurm-8", 4, ""), 120).has_registered());
  const auto records = service.accounting(3710, 1'700'000'000);
  ASSERT_EQ(records.size(), 2U);
  EXPECT_EQ(records[0].job_id, "slurm-7");
  EXPECT_EQ(records[0].qos, "relaxed");
  EXPECT_EQ(records[0].ncpus, 16);
  EXPECT_EQ(records[0].state, "RUNNING");
  // Times on the daemon's clock plus the offset: Unix time.
  EXPECT_DOUBLE_EQ(records[0].submit, 1'700'000'110);
  EXPECT_DOUBLE_EQ(records[0].elapsed, 3600);
  EXPECT_DOUBLE_EQ(records[0].charge, 1 * 2 * 0.7);  // one node-hour, rate 2, relaxed
  EXPECT_EQ(records[1].qos, "normal");               // none named
  EXPECT_DOUBLE_EQ(records[1].charge, 3590.0 / 3600 * 2);
}

TEST(ScheddAccounting, AnEndedJobKeepsItsRecordWhenItsKeyStartsAnother) {
  Service service(with_buffers(), 0);
  ASSERT_TRUE(reply_to(service, 1, register_process("slurm-7", 16, ""), 10).has_registered());
  std::vector<Outgoing> out;
  service.on_disconnect(1, 20, out);
  EXPECT_EQ(service.job_count(), 0U);
  ASSERT_TRUE(reply_to(service, 2, register_process("slurm-7", 4, ""), 30).has_registered());
  EXPECT_EQ(service.job_count(), 1U);
  const auto records = service.accounting(40, 0);
  ASSERT_EQ(records.size(), 2U);
  EXPECT_EQ(records[0].job_id, "slurm-7");
  EXPECT_EQ(records[0].ncpus, 16);
  EXPECT_EQ(records[0].state, "COMPLETED");
  EXPECT_EQ(records[1].job_id, "slurm-7");
  EXPECT_EQ(records[1].ncpus, 4);
  EXPECT_EQ(records[1].state, "RUNNING");
  const auto status = service.status(40);
  ASSERT_EQ(status.jobs_size(), 1);
  EXPECT_EQ(status.jobs(0).job(), "slurm-7");
  EXPECT_EQ(status.jobs(0).ranks(), 4U);
}

TEST(ScheddAccounting, AnUnknownClassIsRefusedAtRegistration) {
  Service service(with_buffers(), 0);
  for (const std::string& bad : std::vector<std::string>{"gold", "0.5", std::string(65, '2')}) {
    const auto reply = reply_to(service, 1, register_process("job", 1, bad), 1);
    ASSERT_TRUE(reply.has_error()) << bad;
    EXPECT_EQ(reply.error().code(), Error::CODE_INVALID);
    EXPECT_NE(reply.error().message().find("io_qos"), std::string::npos) << reply.error().message();
    std::vector<Outgoing> out;
    service.on_disconnect(1, 1, out);
  }
  EXPECT_EQ(service.job_count(), 0U);
  EXPECT_TRUE(service.accounting(2, 0).empty());
}
