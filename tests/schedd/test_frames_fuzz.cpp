// Fuzzing the daemon's input path: frame scanning, Envelope decoding and the state machine, with
// valid frames mutated at random (bit flips, truncation, insertions, length changes) and with
// random bytes. Nothing may crash or throw; every decoded request gets exactly one reply.
// Authentication is on: TCP connections (no peer credentials) must send a good credential
// first, and until they do every reply they get is UNAUTHENTICATED (or a decoding error).
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "control/frame.hpp"
#include "schedd/service.hpp"

using namespace harmonia::schedd;
using harmonia::control::Envelope;
namespace control = harmonia::control;

namespace {

std::vector<std::uint8_t> frame_of(const Envelope& e) {
  std::vector<std::uint8_t> out(control::kHeaderBytes + e.ByteSizeLong());
  control::put_header(out.data(), static_cast<std::uint32_t>(e.ByteSizeLong()));
  e.SerializeToArray(out.data() + control::kHeaderBytes, static_cast<int>(e.ByteSizeLong()));
  return out;
}

/// The credentials the fuzz daemon's checker accepts, and the users they name: the fuzzer tests
/// the daemon's handling of identities, not MUNGE (tests/runtime/test_identity.py does).
std::optional<harmonia::common::Identity> check(const std::string& credential, std::string& why) {
  if (credential == "uid:1000") return harmonia::common::Identity{1000, 1000};
  if (credential == "uid:1001") return harmonia::common::Identity{1001, 1001};
  why = "forged";
  return std::nullopt;
}

std::vector<std::vector<std::uint8_t>> seeds() {
  std::vector<Envelope> messages(11);
  auto* r = messages[0].mutable_register_process();
  r->set_protocol_version(1);
  r->set_job("job-1");
  r->set_ranks(16);
  r->set_in_phase(true);
  messages[1].mutable_phase_begin()->set_name("checkpoint");
  messages[2].mutable_phase_end()->set_bytes(1 << 20);
  messages[3].mutable_flush_request()->set_staged_bytes(123);
  messages[4].mutable_flush_done();
  messages[5].mutable_status_request();
  messages[6].mutable_heartbeat();
  messages[7].mutable_unregister();
  messages[8].mutable_authenticate()->set_credential("uid:1000");
  messages[9].mutable_authenticate()->set_credential("uid:1001");
  messages[10].mutable_authenticate()->set_credential("forged");
  std::vector<std::vector<std::uint8_t>> out;
  for (auto& m : messages) {
    m.set_seq(out.size() + 1);
    out.push_back(frame_of(m));
  }
  return out;
}

/// Feeds `stream` to `service` as the server does; returns the replies expected and produced.
/// `user`: the connection's user, once it has one (updated as it authenticates).
void feed(Service& service, ConnectionId id, const std::vector<std::uint8_t>& stream,
          size_t& requests, size_t& replies, std::optional<std::uint32_t>& user) {
  size_t used = 0;
  for (;;) {
    const auto scan =
        control::scan_frame(stream.data() + used, stream.size() - used, control::kMaxRequestBytes);
    if (scan.kind != control::FrameScan::Kind::Frame) return;
    Envelope request;
    std::vector<Outgoing> out;
    const bool parsed = request.ParseFromArray(stream.data() + used + control::kHeaderBytes,
                                               static_cast<int>(scan.body_length));
    if (parsed) {
      service.on_message(id, request, 0, out);
    } else {
      service.on_malformed(id, 0, out);
    }
    ++requests;
    // Pushes never go to the requester: what reaches it is its reply.
    for (const auto& o : out) {
      const bool reply = o.to == id && (!parsed || o.message.seq() == request.seq());
      replies += reply;
      if (!reply) continue;
      if (!user && parsed && !request.has_authenticate()) {
        ASSERT_TRUE(o.message.has_error()) << "a request with no identity was served";
        ASSERT_EQ(o.message.error().code(), control::Error::CODE_UNAUTHENTICATED);
      }
      if (o.message.has_authenticated()) {
        const std::uint32_t uid = o.message.authenticated().uid();
        if (user) {
          ASSERT_EQ(uid, *user) << "a credential changed a connection's user";
          continue;
        }
        ASSERT_EQ(request.authenticate().credential(), "uid:" + std::to_string(uid));
        user = uid;
      }
    }
    used += control::kHeaderBytes + scan.body_length;
  }
}

}  // namespace

TEST(FrameFuzz, MutatedFramesNeverCrashAndAlwaysGetAReply) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in strings is reported per frame
  std::mt19937_64 random(20261122);
  const auto corpus = seeds();
  for (const char* strategy : {"2a", "1b", "3b", "throttle"}) {
    ServiceConfig config;
    config.strategy = strategy;
    config.coordinator.flush_order = harmonia::core::coordination::FlushOrder::Token;
    config.check_credential = check;
    Service service(config, 0);
    size_t requests = 0, replies = 0;
    std::map<ConnectionId, std::optional<std::uint32_t>> user;
    for (int round = 0; round < 20000; ++round) {
      const ConnectionId id = 1 + random() % 8;
      if (random() % 50 == 0) {
        std::vector<Outgoing> out;
        service.on_disconnect(id, 0, out);
      }
      if (random() % 3 == 0) {  // TCP: no identity until it authenticates
        service.on_connect(id, std::nullopt, 0);
        user[id] = std::nullopt;
      } else {
        user[id] = static_cast<std::uint32_t>(1000 + random() % 2);
        service.on_connect(id, *user[id], 0);
      }
      std::vector<std::uint8_t> stream;
      for (int k = 0; k < 4; ++k) {
        auto frame = corpus[random() % corpus.size()];
        switch (random() % 6) {
          case 0:  // flip a bit in the body
            if (frame.size() > control::kHeaderBytes)
              frame[control::kHeaderBytes + random() % (frame.size() - control::kHeaderBytes)] ^=
                  static_cast<std::uint8_t>(1u << (random() % 8));
            break;
          case 1:  // random bytes in the body, length kept consistent
            for (size_t i = control::kHeaderBytes; i < frame.size(); ++i)
              if (random() % 3 == 0) frame[i] = static_cast<std::uint8_t>(random());
            break;
          case 2: {  // insert bytes and fix the length
            const size_t extra = random() % 16;
            for (size_t i = 0; i < extra; ++i)
              frame.insert(frame.begin() + static_cast<long>(control::kHeaderBytes +
                                                             random() % (frame.size() - 3)),
                           static_cast<std::uint8_t>(random()));
            control::put_header(frame.data(),
                                static_cast<std::uint32_t>(frame.size() - control::kHeaderBytes));
            break;
          }
          case 3:  // truncate the body, length kept consistent
            frame.resize(control::kHeaderBytes + random() % (frame.size() - 3));
            control::put_header(frame.data(),
                                static_cast<std::uint32_t>(frame.size() - control::kHeaderBytes));
            break;
          default:
            break;
        }
        stream.insert(stream.end(), frame.begin(), frame.end());
      }
      ASSERT_NO_THROW(feed(service, id, stream, requests, replies, user[id]));
      ASSERT_FALSE(HasFatalFailure());
      std::vector<Outgoing> out;
      ASSERT_NO_THROW(service.on_tick(static_cast<double>(round) * 0.001, out));
    }
    EXPECT_EQ(replies, requests) << strategy << ": every request gets one reply";
    EXPECT_GT(requests, 50000u);
  }
}

TEST(FrameFuzz, LengthHeadersAreBoundedAndIncompleteFramesWait) {
  std::uint8_t header[4];
  control::put_header(header, static_cast<std::uint32_t>(control::kMaxRequestBytes + 1));
  EXPECT_EQ(control::scan_frame(header, 4, control::kMaxRequestBytes).kind,
            control::FrameScan::Kind::TooLarge);
  control::put_header(header, 10);
  EXPECT_EQ(control::scan_frame(header, 4, control::kMaxRequestBytes).kind,
            control::FrameScan::Kind::NeedMore);
  EXPECT_EQ(control::scan_frame(header, 3, control::kMaxRequestBytes).kind,
            control::FrameScan::Kind::NeedMore);
  std::mt19937_64 random(7);
  for (int k = 0; k < 100000; ++k) {
    std::vector<std::uint8_t> bytes(random() % 64);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
    const auto scan = control::scan_frame(bytes.data(), bytes.size(), control::kMaxRequestBytes);
    if (scan.kind == control::FrameScan::Kind::Frame) {
      EXPECT_LE(control::kHeaderBytes + scan.body_length, bytes.size());
    }
  }
}
