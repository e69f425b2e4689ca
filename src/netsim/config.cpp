#include "netsim/config.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace harmonia::netsim {

using nlohmann::json;

namespace {

/// Reads required keys of one JSON object and names the full key path in every error.
class Reader {
 public:
  Reader(const json& node, std::string path) : node_(node), path_(std::move(path)) {
    if (!node_.is_object())
      throw std::runtime_error((path_.empty() ? "config" : path_) + ": must be an object");
  }

  Reader child(const std::string& key) const { return {at(key), join(key)}; }

  double number(const std::string& key, double min, bool inclusive = true) const {
    const auto& v = at(key);
    if (!v.is_number()) fail(key, "must be a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || (inclusive ? !(x >= min) : !(x > min)))
      fail(key, std::string("must be ") + (inclusive ? ">= " : "> ") + std::to_string(min));
    return x;
  }
  long integer(const std::string& key, long min) const {
    const auto& v = at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(key, "is too large");
    if (v.get<int64_t>() < min) fail(key, "must be >= " + std::to_string(min));
    return static_cast<long>(v.get<int64_t>());
  }
  /// An optional number: `fallback` when the key is absent.
  double optional_number(const std::string& key, double min, double fallback) const {
    return node_.contains(key) ? number(key, min) : fallback;
  }
  bool boolean(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_boolean()) fail(key, "must be true or false");
    return v.get<bool>();
  }
  std::string string(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
  std::vector<unsigned> counts(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_array() || v.empty()) fail(key, "must be a non-empty list");
    std::vector<unsigned> out;
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > 4096)
        fail(key, "entries must be integers in [1, 4096]");
      out.push_back(x.get<unsigned>());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error(join(key) + ": " + why);
  }

 private:
  const json& at(const std::string& key) const {
    if (!node_.contains(key)) fail(key, "missing");
    return node_.at(key);
  }
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  const json& node_;
  std::string path_;
};

JobConfig parse_job(const Reader& r) {
  JobConfig job;
  job.enabled = r.boolean("enabled");
  job.size = r.number("size", 1);
  if (job.size != std::floor(job.size) || job.size > 1e15) r.fail("size", "must be whole bytes");
  job.pacing.interval = r.number("interval", 0);
  job.pacing.window = r.number("window", 0);
  job.pacing.jitter = r.number("jitter", 0);
  if (job.pacing.jitter >= 1) r.fail("jitter", "must be < 1");
  job.pacing.start_spread = r.optional_number("start_spread", 0, 0.0);
  job.warmup = r.integer("warmup", 0);
  job.samples = r.integer("samples", 1);
  job.finite = r.boolean("finite");
  job.measured = r.boolean("measured");
  return job;
}

}  // namespace

Config parse_config(const json& document) {
  const Reader root(document, "");
  Config c;
  c.name = root.string("name");
  c.seed = static_cast<uint64_t>(root.integer("seed", 0));

  const Reader fabric = root.child("fabric");
  c.down = fabric.counts("down");
  c.up = fabric.counts("up");
  if (c.down.size() != c.up.size()) fabric.fail("up", "needs one entry per level, as down");
  if (c.up[0] != 1) fabric.fail("up", "the first entry must be 1 (one cable per node)");
  c.link_bw = fabric.number("link_bw", 0, false);
  c.hop_latency = fabric.number("hop_latency", 0);

  const Reader servers = root.child("servers");
  c.servers = servers.integer("count", 1);
  try {
    c.server_placement = parse_server_placement(servers.string("placement"));
  } catch (const std::invalid_argument& e) {
    servers.fail("placement", e.what());
  }
  try {
    c.server_order = parse_server_order(servers.string("order"));
  } catch (const std::invalid_argument& e) {
    servers.fail("order", e.what());
  }
  const Reader jobs = root.child("jobs");
  try {
    c.job_placement = parse_job_placement(jobs.string("placement"));
  } catch (const std::invalid_argument& e) {
    jobs.fail("placement", e.what());
  }
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
  return c;
}

Config load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read");
  json document;
  try {
    document = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
  try {
    return parse_config(document);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace harmonia::netsim
