#include <gtest/gtest.h>

#include "netsim/config.hpp"
#include "netsim/results.hpp"

using namespace harmonia::netsim;
using nlohmann::json;

namespace {
json valid() {
  const json job = {{"enabled", true}, {"size", 4096},    {"interval", 5e-4},
                    {"window", 0},     {"jitter", 0.05},  {"warmup", 2},
                    {"samples", 10},   {"finite", false}, {"measured", true}};
  return {{"name", "t"},
          {"seed", 3},
          {"fabric",
           {{"down", {4, 4, 2}},
            {"up", {1, 4, 4}},
            {"link_bw", 12.5e9},
            {"hop_latency", 1e-7},
            {"model", "packet"},
            {"packet_size", 4096},
            {"window", 131072},
            {"flow_control", "credits"},
            {"port_buffer", 65536}}},
          {"servers", {{"count", 8}, {"placement", "spread-target"}, {"order", "round-robin"}}},
          {"jobs", {{"placement", "random-switch"}, {"io_fraction", 0.25}}},
          {"mpi", job},
          {"io", job},
          {"limits", {{"max_transfers", 0}, {"max_time", 0}}},
          {"output", {{"link_loads", true}, {"samples", false}}}};
}

std::string error_of(const json& doc) {
  try {
    parse_config(doc);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, ParsesTheNormalizedForm) {
  const Config c = parse_config(valid());
  EXPECT_EQ(c.down, (std::vector<unsigned>{4, 4, 2}));
  EXPECT_EQ(c.server_placement, ServerPlacement::SpreadTarget);
  EXPECT_EQ(c.job_placement, JobPlacement::RandomSwitch);
  EXPECT_DOUBLE_EQ(c.io_fraction, 0.25);
  EXPECT_DOUBLE_EQ(c.mpi.pacing.interval, 5e-4);
  EXPECT_EQ(c.io.samples, 10);
  EXPECT_EQ(c.model, NetworkModel::Packet);
  EXPECT_DOUBLE_EQ(c.packet.packet_size, 4096);
  EXPECT_DOUBLE_EQ(c.packet.window, 131072);
  EXPECT_TRUE(c.packet.credits);
  EXPECT_DOUBLE_EQ(c.packet.port_buffer, 65536);
}

TEST(Config, ErrorsNameTheKey) {
  auto doc = valid();
  doc["mpi"]["size"] = 0;
  EXPECT_EQ(error_of(doc), "mpi.size: must be >= 1.000000");
  doc = valid();
  doc["io"].erase("samples");
  EXPECT_EQ(error_of(doc), "io.samples: missing");
  doc = valid();
  doc["io"]["samples"] = 0;
  EXPECT_EQ(error_of(doc), "io.samples: must be >= 1");
  doc = valid();
  doc["servers"]["placement"] = "nearby";
  EXPECT_NE(error_of(doc).find("servers.placement: unknown server placement"), std::string::npos);
  doc = valid();
  doc["fabric"]["model"] = "cells";
  EXPECT_EQ(error_of(doc), "fabric.model: unknown network model 'cells' (fluid, packet)");
  doc = valid();
  doc["fabric"]["packet_size"] = 70000;
  EXPECT_EQ(error_of(doc), "fabric.packet_size: must be whole bytes, at most 65000");
  doc = valid();
  doc["fabric"]["flow_control"] = "pause";
  EXPECT_EQ(error_of(doc), "fabric.flow_control: unknown flow control 'pause' (credits, none)");
  doc = valid();
  doc["fabric"]["port_buffer"] = 4195;
  EXPECT_EQ(
      error_of(doc),
      "fabric.port_buffer: must hold one packet: at least packet_size + 100 bytes of headers");
  doc = valid();
  doc["fabric"]["up"] = {2, 4, 4};
  EXPECT_NE(error_of(doc).find("fabric.up"), std::string::npos);
  doc = valid();
  doc["mpi"]["enabled"] = false;
  doc["io"]["measured"] = false;
  EXPECT_NE(error_of(doc).find("at least one enabled job must be measured"), std::string::npos);
  doc = valid();
  doc["jobs"]["io_fraction"] = 1.5;
  EXPECT_EQ(error_of(doc), "jobs.io_fraction: must be <= 1");
  EXPECT_NE(error_of(json::array()).find("must be an object"), std::string::npos);
}

TEST(Results, LinkLoadMatricesFollowTheFabric) {
  const Config c = parse_config(valid());
  const Fabric f(c.down, c.up);
  const auto servers = place_servers(f, c.servers, c.server_placement, c.seed);
  const auto layout = place_jobs(f, servers, c.io_fraction, c.job_placement, c.seed);
  RunResult r(f);
  r.stop_reason = "quota";
  r.loads.add(Traffic::Io, f.route(0, 31), 100);
  r.io.latencies = {3, 1, 2};
  const auto doc = results_json(c, f, layout, r);
  EXPECT_EQ(doc["jobs"]["io"]["latency"]["median"], 2.0);
  const auto& levels = doc["link_load"]["levels"];
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[1]["rows"], 8);  // leaves
  EXPECT_EQ(levels[1]["cols"], 4);  // up-ports
  EXPECT_EQ(levels[0]["up"]["io"][0][0], 100.0);
  EXPECT_EQ(levels[0]["down"]["io"][31][0], 100.0);
  EXPECT_EQ(levels[0]["up"]["mpi"][0][0], 0.0);
  EXPECT_EQ(doc["truncated"], false);
  // Same input, same bytes.
  EXPECT_EQ(doc.dump(), results_json(c, f, layout, r).dump());
}
