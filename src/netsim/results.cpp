#include "netsim/results.hpp"

#include "netsim/stats.hpp"

namespace harmonia::netsim {

using nlohmann::ordered_json;

namespace {

ordered_json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean},     {"stddev", d.stddev}, {"min", d.min},
          {"q1", d.q1},       {"median", d.median}, {"q3", d.q3},         {"p90", d.p90},
          {"p99", d.p99},     {"max", d.max}};
}

ordered_json job_json(const JobConfig& job, const JobResult& r, double end_time) {
  ordered_json out;
  out["enabled"] = job.enabled;
  out["clients"] = r.clients;
  out["size"] = job.size;
  out["interval"] = job.pacing.interval;
  out["window"] = job.pacing.window;
  out["start_spread"] = job.pacing.start_spread;
  out["warmup"] = job.warmup;
  out["samples_per_client"] = job.samples;
  out["finite"] = job.finite;
  out["measured"] = job.measured;
  out["transfers"] = r.transfers;
  out["bytes"] = r.bytes;
  out["throughput"] = end_time > 0 ? r.bytes / end_time : 0.0;
  out["quota_time"] = r.quota_time >= 0 ? ordered_json(r.quota_time) : ordered_json(nullptr);
  out["latency"] = distribution_json(summarize(r.latencies));
  return out;
}

/// Bytes per link of one level as rows (the lower elements) x columns (their up-ports).
ordered_json level_json(const Fabric& f, const LinkLoad& loads, int level) {
  const long rows = f.count(level);
  const long cols = f.up()[static_cast<size_t>(level)];
  auto matrix = [&](Traffic traffic, Direction direction) {
    ordered_json m = ordered_json::array();
    for (long r = 0; r < rows; ++r) {
      ordered_json row = ordered_json::array();
      for (long c = 0; c < cols; ++c) {
        const long cable = f.cable_index({level, r, static_cast<int>(c)});
        row.push_back(
            loads.bytes(traffic)[static_cast<size_t>(Fabric::link_index({cable, direction}))]);
      }
      m.push_back(std::move(row));
    }
    return m;
  };
  return {
      {"level", level},
      {"lower", Fabric::level_name(level)},
      {"upper", Fabric::level_name(level + 1)},
      {"rows", rows},
      {"cols", cols},
      {"up",
       {{"mpi", matrix(Traffic::Mpi, Direction::Up)}, {"io", matrix(Traffic::Io, Direction::Up)}}},
      {"down",
       {{"mpi", matrix(Traffic::Mpi, Direction::Down)},
        {"io", matrix(Traffic::Io, Direction::Down)}}}};
}

}  // namespace

ordered_json results_json(const Config& c, const Fabric& f, const Layout& layout,
                          const RunResult& r) {
  ordered_json out;
  out["name"] = c.name;
  out["seed"] = c.seed;
  out["version"] = HARMONIA_VERSION;
  out["fabric"] = {{"levels", f.levels()}, {"down", f.down()},
                   {"up", f.up()},         {"nodes", f.nodes()},
                   {"leaves", f.leaves()}, {"pods", f.pods()},
                   {"link_bw", c.link_bw}, {"hop_latency", c.hop_latency}};
  out["network"] = {{"model", to_string(c.model)}};
  if (c.model == NetworkModel::Packet)
    out["network"].update({{"packet_size", c.packet.packet_size},
                           {"window", c.packet.window},
                           {"flow_control", c.packet.credits ? "credits" : "none"},
                           {"port_buffer", c.packet.port_buffer},
                           {"packet_drops", r.packet_drops}});
  out["layout"] = {{"server_placement", to_string(c.server_placement)},
                   {"server_order", to_string(c.server_order)},
                   {"job_placement", to_string(c.job_placement)},
                   {"io_fraction", c.io_fraction},
                   {"servers", layout.servers},
                   {"io_clients", layout.io_clients.size()},
                   {"mpi_clients", layout.mpi_clients.size()}};
  out["end_time"] = r.end_time;
  out["stop_reason"] = r.stop_reason;
  out["truncated"] = r.stop_reason != "quota";
  out["transfers_started"] = r.transfers_started;
  out["jobs"] = {{"mpi", job_json(c.mpi, r.mpi, r.end_time)},
                 {"io", job_json(c.io, r.io, r.end_time)}};
  if (c.link_loads) {
    ordered_json levels = ordered_json::array();
    for (int level = 0; level < f.levels(); ++level)
      levels.push_back(level_json(f, r.loads, level));
    out["link_load"] = {{"unit", "bytes"}, {"levels", std::move(levels)}};
  }
  if (c.keep_samples) out["samples"] = {{"mpi", r.mpi.latencies}, {"io", r.io.latencies}};
  return out;
}

}  // namespace harmonia::netsim
