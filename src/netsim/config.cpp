#include "netsim/config.hpp"

#include <cmath>
#include <stdexcept>

#include "simkit/json_reader.hpp"

namespace harmonia::netsim {

using nlohmann::json;

namespace {

using simkit::Reader;

JobConfig parse_job(const Reader& r) {
  JobConfig job;
  job.enabled = r.boolean("enabled");
  job.size = r.number("size", 1);
  if (job.size != std::floor(job.size) || job.size > 1e15) r.fail("size", "must be whole bytes");
  job.pacing.interval = r.number("interval", 0);
  job.pacing.window = r.number("window", 0);
  job.pacing.jitter = r.number("jitter", 0);
  if (job.pacing.jitter >= 1) r.fail("jitter", "must be < 1");
  job.pacing.start_spread = r.has("start_spread") ? r.number("start_spread", 0) : 0.0;
  job.warmup = r.integer("warmup", 0);
  job.samples = r.integer("samples", 1);
  job.finite = r.boolean("finite");
  job.measured = r.boolean("measured");
  return job;
}

}  // namespace

NetworkModel parse_network_model(const std::string& name) {
  if (name == "fluid") return NetworkModel::Fluid;
  if (name == "packet") return NetworkModel::Packet;
  throw std::invalid_argument("unknown network model '" + name + "' (fluid, packet)");
}

std::string to_string(NetworkModel model) {
  return model == NetworkModel::Fluid ? "fluid" : "packet";
}

bool parse_flow_control(const std::string& name) {
  if (name == "credits") return true;
  if (name == "none") return false;
  throw std::invalid_argument("unknown flow control '" + name + "' (credits, none)");
}

Config parse_config(const json& document) {
  const simkit::Document doc(document);
  const Reader root = doc.root();
  Config c;
  c.name = root.string("name");
  c.seed = static_cast<uint64_t>(root.integer("seed", 0));

  const Reader fabric = root.child("fabric");
  c.down = fabric.counts("down", 4096);
  c.up = fabric.counts("up", 4096);
  if (c.down.size() != c.up.size()) fabric.fail("up", "needs one entry per level, as down");
  if (c.up[0] != 1) fabric.fail("up", "the first entry must be 1 (one cable per node)");
  c.link_bw = fabric.number("link_bw", 0, false);
  c.hop_latency = fabric.number("hop_latency", 0);
  c.model = fabric.parsed("model", parse_network_model);
  c.packet.packet_size = fabric.number("packet_size", 1);
  if (c.packet.packet_size != std::floor(c.packet.packet_size) || c.packet.packet_size > 65000)
    fabric.fail("packet_size", "must be whole bytes, at most 65000");
  c.packet.window = fabric.number("window", 1);
  if (c.packet.window != std::floor(c.packet.window) || c.packet.window > 1e9)
    fabric.fail("window", "must be whole bytes, at most 1e9");
  c.packet.credits = fabric.parsed("flow_control", parse_flow_control);
  c.packet.port_buffer = fabric.number("port_buffer", 1);
  if (c.packet.port_buffer != std::floor(c.packet.port_buffer) || c.packet.port_buffer > 1e9)
    fabric.fail("port_buffer", "must be whole bytes, at most 1e9");
  if (c.packet.port_buffer < c.packet.packet_size + kPacketHeaderRoom)
    fabric.fail("port_buffer", "must hold one packet: at least packet_size + " +
                                   std::to_string(static_cast<int>(kPacketHeaderRoom)) +
                                   " bytes of headers");

  const Reader servers = root.child("servers");
  c.servers = servers.integer("count", 1);
  c.server_placement = servers.parsed("placement", parse_server_placement);
  c.server_order = servers.parsed("order", parse_server_order);
  const Reader jobs = root.child("jobs");
  c.job_placement = jobs.parsed("placement", parse_job_placement);
  c.io_fraction = jobs.number("io_fraction", 0);
  if (c.io_fraction > 1) jobs.fail("io_fraction", "must be <= 1");

  c.mpi = parse_job(root.child("mpi"));
  c.io = parse_job(root.child("io"));
  if (!(c.mpi.enabled && c.mpi.measured) && !(c.io.enabled && c.io.measured))
    root.fail("mpi.measured", "at least one enabled job must be measured");

  const Reader limits = root.child("limits");
  c.max_transfers = limits.integer("max_transfers", 0);
  c.max_time = limits.number("max_time", 0);
  const Reader output = root.child("output");
  c.link_loads = output.boolean("link_loads");
  c.keep_samples = output.boolean("samples");
  doc.check_all_read();
  return c;
}

Config load_config(const std::string& path) { return simkit::load_with(path, parse_config); }

}  // namespace harmonia::netsim
