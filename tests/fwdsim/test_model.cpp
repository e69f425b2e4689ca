// The forwarding-layer model without SimGrid: access patterns, striping, disk efficiency, config.
#include <gtest/gtest.h>

#include <set>

#include "fwdsim/model.hpp"

using namespace harmonia::fwdsim;
using nlohmann::json;

TEST(Patterns, FilePerProcessIsContiguousInOwnFiles) {
  const AppConfig app{"A", 4, Pattern::FilePerProcess, harmonia::core::Op::Write, 100, 3};
  const auto r = client_requests(app, 1, 2);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].file, (1ULL << 32) + 2);
  EXPECT_EQ(r[1].offset, 100u);
  EXPECT_EQ(r[2].offset, 200u);
  EXPECT_NE(client_requests(app, 1, 3)[0].file, r[0].file);
}

TEST(Patterns, SharedContiguousGivesEachClientItsBlock) {
  const AppConfig app{"A", 4, Pattern::SharedContiguous, harmonia::core::Op::Write, 100, 3};
  EXPECT_EQ(client_requests(app, 0, 0)[2].offset, 200u);
  EXPECT_EQ(client_requests(app, 0, 1)[0].offset, 300u);
  EXPECT_EQ(client_requests(app, 0, 3)[2].offset, 1100u);
}

TEST(Patterns, SharedStridedInterleavesTheClientsAndCoversTheFileOnce) {
  const AppConfig app{"A", 4, Pattern::SharedStrided, harmonia::core::Op::Read, 100, 3};
  EXPECT_EQ(client_requests(app, 0, 1)[0].offset, 100u);
  EXPECT_EQ(client_requests(app, 0, 1)[1].offset, 500u);
  std::set<std::uint64_t> offsets;
  for (int rank = 0; rank < 4; ++rank)
    for (const auto& q : client_requests(app, 0, rank)) offsets.insert(q.offset);
  EXPECT_EQ(offsets.size(), 12u);
  EXPECT_EQ(*offsets.rbegin(), 1100u) << "no gap, no overlap";
}

TEST(Striping, StripesGoRoundRobinFromTheFilesOwnServer) {
  const Striping s{1000, 4};
  EXPECT_EQ(s.server_of(0, 0), 0);
  EXPECT_EQ(s.server_of(0, 2500), 2);
  EXPECT_EQ(s.server_of(1, 0), 1) << "files start on different servers";
  EXPECT_EQ(s.server_of(3, 1000), 0);
  const auto pieces = s.split(0, 900, 2200);  // 100 on 0, 1000 on 1, 1000 on 2, 100 on 3
  EXPECT_EQ(pieces, (std::map<int, std::uint64_t>{{0, 100}, {1, 1000}, {2, 1000}, {3, 100}}));
  EXPECT_EQ(s.split(0, 0, 8000).at(0), 2000u) << "wraps around";
}

TEST(Disk, CapacityFallsWithStreamsAndEfficiencyRisesWithSize) {
  const DiskConfig d{150e6, 0.1, 32768};
  EXPECT_DOUBLE_EQ(disk_capacity(d, 1), 150e6);
  EXPECT_DOUBLE_EQ(disk_capacity(d, 11), 75e6);
  EXPECT_DOUBLE_EQ(size_efficiency(d, 32768), 0.5);
  EXPECT_GT(size_efficiency(d, 1 << 20), 0.96);
  // One request alone on an idle server: its time in closed form.
  const double bytes = 131072;
  const double seconds = bytes / (disk_capacity(d, 1) * size_efficiency(d, bytes));
  EXPECT_NEAR(seconds, (bytes + 32768) / 150e6, 1e-12);
}

TEST(Config, ParsesAndNamesTheBadKey) {
  json good = json::parse(R"({"seed": 1,
    "platform": {"link_bw": 1e9, "servers": 4, "nodes": 2, "node_threads": 4, "stripe": 65536,
                 "disk": {"peak_bw": 1e8, "contention": 0.1, "size_half": 1024}},
    "forwarding": {"enabled": true, "scheduler": "twins", "options": {"twins.window_us": "10"}},
    "apps": [{"name": "A", "clients": 2, "pattern": "shared-strided", "op": "read",
              "request": 4096, "requests": 3}]})");
  const Config c = parse_config(good);
  EXPECT_EQ(c.servers, 4);
  EXPECT_EQ(c.options.at("twins.window_us"), "10");
  EXPECT_EQ(c.apps[0].pattern, Pattern::SharedStrided);
  auto broken = [&](const std::string& pointer, const json& value) {
    json d = good;
    d[json::json_pointer(pointer)] = value;
    try {
      parse_config(d);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(broken("/platform/servers", 0), "platform.servers: must be an integer >= 1");
  EXPECT_EQ(broken("/apps/0/pattern", "random"),
            "apps[0].pattern: must be file-per-process, shared-contiguous or shared-strided");
  EXPECT_EQ(broken("/platform/disk/contention", -1),
            "platform.disk.contention: must be a number >= 0");
  EXPECT_EQ(broken("/forwarding/options/twins.window_us", 10),
            "forwarding.options.twins.window_us: must be a string");
}
