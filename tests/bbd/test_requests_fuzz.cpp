// Fuzzing a buffer node's request decoder: valid requests mutated at random (bit flips, random
// bytes, insertions, truncation) and answered against a real store. Nothing may crash or throw;
// every answer carries a known code; nothing is written outside the node's two directories; and
// every write the node acknowledged is in the PFS, with later writes winning, after the drain.
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "bbd/requests.hpp"

using namespace harmonia::bbd;
namespace bb = harmonia::bb;
namespace fs = std::filesystem;

namespace {

/// The one credential the fuzz node's checker accepts (as root): the fuzzer tests the node's
/// handling of identities, not MUNGE's cryptography (tests/runtime/test_identity.py does).
constexpr const char* kGoodCredential = "good";

std::vector<std::string> seeds() {
  std::vector<bb::Request> requests(9);
  auto* w = requests[0].mutable_write();
  w->set_file("run/a.dat");
  w->set_offset(4096);
  w->set_data(std::string(300, 'w'));
  w->set_job("job-1");
  auto* w2 = requests[1].mutable_write();
  w2->set_file("b.dat");
  w2->set_offset(0);
  w2->set_data("0123456789");
  auto* r = requests[2].mutable_read();
  r->set_file("run/a.dat");
  r->set_offset(4096);
  r->set_length(100);
  requests[3].mutable_drain()->set_file("b.dat");
  requests[4].mutable_status();
  requests[5].mutable_drain();
  auto* raw = requests[6].mutable_write();  // its bytes after the frame
  raw->set_file("run/raw.dat");
  raw->set_offset(100);
  raw->set_payload(200);
  raw->set_job("job-2");
  requests[7].mutable_authenticate()->set_credential(kGoodCredential);
  requests[8].mutable_authenticate()->set_credential("forged");
  std::vector<std::string> out;
  for (auto& request : requests) {
    request.set_seq(out.size() + 1);
    out.push_back(request.SerializeAsString());
  }
  return out;
}

std::string mutate(std::string body, std::mt19937_64& random) {
  switch (random() % 6) {
    case 0:  // flip a bit
      if (!body.empty()) body[random() % body.size()] ^= static_cast<char>(1u << (random() % 8));
      break;
    case 1:  // random bytes here and there
      for (auto& byte : body)
        if (random() % 4 == 0) byte = static_cast<char>(random());
      break;
    case 2:  // insert bytes
      for (int k = static_cast<int>(random() % 8); k > 0; --k)
        body.insert(body.begin() + static_cast<long>(random() % (body.size() + 1)),
                    static_cast<char>(random()));
      break;
    case 3:  // truncate
      body.resize(random() % (body.size() + 1));
      break;
    case 4: {  // random bytes only
      std::string noise(random() % 64, '\0');
      for (auto& byte : noise) byte = static_cast<char>(random());
      return noise;
    }
    default:
      break;
  }
  return body;
}

}  // namespace

TEST(RequestFuzz, MutatedRequestsNeverCrashAndAcknowledgedWritesReachThePfs) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in strings is reported per frame
  const fs::path root = fs::temp_directory_path() / ("harmonia-fuzz-" + std::to_string(getpid()));
  fs::remove_all(root);
  // Nested, so that a name escaping the node's directories by a few levels lands in `root`,
  // where the check at the end finds it.
  const fs::path home = root / "x" / "y";
  fs::create_directories(home / "dev");
  fs::create_directories(home / "pfs");
  std::mt19937_64 random(20261123);
  const auto corpus = seeds();
  // What the PFS must hold once everything has drained: every acknowledged write, in order,
  // for files whose acknowledged writes all end below this bound (larger ones are sparse files
  // too big to compare).
  constexpr std::uint64_t kCompared = 1 << 20;
  std::map<std::string, std::string> expected;
  std::map<std::string, bool> too_large;
  std::map<int, int> codes;
  {
    Store store((home / "dev").string(), (home / "pfs").string(), 64 << 20);
    // A connection with no identity gets nothing but UNAUTHENTICATED.
    Access access;
    access.check_credential = [](const std::string& credential, std::string& why) {
      if (credential == kGoodCredential) return std::optional<harmonia::common::Identity>({0, 0});
      why = "forged";
      return std::optional<harmonia::common::Identity>();
    };
    Session authenticated;
    authenticated.who = harmonia::common::Identity{0, 0};
    for (int round = 0; round < 30000; ++round) {
      Session fresh;  // a new connection that has not authenticated
      Session& session = random() % 4 == 0 ? fresh : authenticated;
      const std::string body = mutate(corpus[random() % corpus.size()], random);
      bb::Request request;
      const bool decoded = request.ParseFromString(body);
      // As the node's connections do: a write that announces a payload gets one, the bytes that
      // follow its frame (up to a bound here), or none at all.
      std::string payload;
      if (decoded && payload_bytes(request) > 0 && payload_bytes(request) <= (64 << 10) &&
          random() % 4 != 0)
        for (long long k = payload_bytes(request); k > 0; --k)
          payload.push_back(static_cast<char>('a' + random() % 26));
      bb::Response response;
      ASSERT_NO_THROW(response = payload.empty()
                                     ? answer(store, access, session, body)
                                     : answer(store, access, session, request, payload));
      ASSERT_TRUE(bb::Response::Code_IsValid(response.code()));
      codes[response.code()] += 1;
      if (&session == &fresh && decoded && !request.has_authenticate()) {
        ASSERT_TRUE(response.code() == bb::Response::UNAUTHENTICATED ||
                    response.code() == bb::Response::MALFORMED)
            << "a request with no identity got code " << response.code();
        continue;
      }
      if (decoded && request.has_authenticate() && &session == &fresh) {
        ASSERT_EQ(response.code() == bb::Response::OK,
                  request.authenticate().credential() == kGoodCredential)
            << "code " << response.code() << ": " << response.message();
      } else if (decoded && request.has_authenticate()) {  // confirms its user, never another
        ASSERT_EQ(response.code(), bb::Response::OK) << response.message();
        ASSERT_EQ(response.uid(), 0u);
        ASSERT_EQ(session.who->uid, 0u);
      }
      if (response.code() != bb::Response::OK || !request.has_write()) continue;
      const auto& w = request.write();
      const std::string& data = payload.empty() ? w.data() : payload;
      if (data.empty()) continue;
      if (w.offset() + data.size() > kCompared) {
        too_large[w.file()] = true;
        continue;
      }
      std::string& content = expected[w.file()];
      if (content.size() < w.offset() + data.size()) content.resize(w.offset() + data.size(), '\0');
      content.replace(w.offset(), data.size(), data);
    }
    const StoreStats stats = store.stats();
    std::uint64_t held = 0;
    for (const auto& [file, bytes] : store.held()) held += bytes;
    EXPECT_EQ(stats.used, held);
    EXPECT_LE(stats.used, stats.capacity);
    for (const auto& [file, large] : too_large) {
      std::string why;
      (void)store.drain(file, why);  // may fail: the PFS refuses some offsets; not compared
      expected.erase(file);
    }
    std::string why;
    for (const auto& [file, content] : expected)
      ASSERT_EQ(store.drain(file, why), Status::Ok) << file << ": " << why;
  }
  EXPECT_GT(codes[bb::Response::OK], 1000);
  EXPECT_GT(codes[bb::Response::MALFORMED], 1000);
  EXPECT_GT(codes[bb::Response::INVALID], 10);
  ASSERT_GE(expected.size(), 3u) << "the seeds' files at least";
  for (const auto& [file, content] : expected) {
    std::ifstream in(home / "pfs" / file, std::ios::binary);
    const std::string got{std::istreambuf_iterator<char>(in), {}};
    ASSERT_EQ(got.size(), content.size()) << file;
    EXPECT_TRUE(got == content) << file << ": the PFS file differs from the acknowledged writes";
  }
  // Everything the node wrote is under its two directories (the only ones it was given).
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string where = fs::relative(entry.path(), home).string();
    EXPECT_TRUE(where.rfind("dev/", 0) == 0 || where.rfind("pfs/", 0) == 0) << entry.path();
  }
  fs::remove_all(root);
}

TEST(RequestFuzz, AnOversizedFrameIsRefusedByItsLength) {
  const bb::Response refused = refuse_oversized("frame", kMaxRequestBytes + 1, kMaxRequestBytes);
  EXPECT_EQ(refused.code(), bb::Response::MALFORMED);
  EXPECT_NE(refused.message().find(std::to_string(kMaxRequestBytes)), std::string::npos);
}
