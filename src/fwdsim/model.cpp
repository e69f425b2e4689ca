#include "fwdsim/model.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/requests/registry.hpp"
#include "simkit/json_reader.hpp"

namespace harmonia::fwdsim {

using nlohmann::json;

namespace {

using simkit::Reader;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// The forwarding scenario's own wording: type and bound in one phrase.
std::int64_t whole(const Reader& r, const std::string& key, std::int64_t low,
                   std::int64_t high = std::numeric_limits<int>::max()) {
  const std::int64_t x = r.integer(key, std::numeric_limits<std::int64_t>::min(), high);
  if (x < low) r.fail(key, "must be an integer >= " + std::to_string(low));
  return x;
}

double positive(const Reader& r, const std::string& key) {
  const double x = r.number(key);
  if (!(x > 0)) r.fail(key, "must be a number > 0");
  return x;
}

Pattern parse_pattern(const std::string& name) {
  if (name == "file-per-process") return Pattern::FilePerProcess;
  if (name == "shared-contiguous") return Pattern::SharedContiguous;
  if (name == "shared-strided") return Pattern::SharedStrided;
  throw std::invalid_argument("must be file-per-process, shared-contiguous or shared-strided");
}

core::Op parse_op(const std::string& name) {
  if (name == "read") return core::Op::Read;
  if (name == "write") return core::Op::Write;
  throw std::invalid_argument("must be read or write");
}

}  // namespace

Config parse_config(const json& d) {
  const simkit::Document document(d);
  const Reader root = document.root();
  Config c;
  c.seed = static_cast<std::uint64_t>(whole(root, "seed", 0, kInt64Max));
  const Reader platform = root.child("platform");
  c.link_bw = positive(platform, "link_bw");
  c.servers = static_cast<int>(whole(platform, "servers", 1));
  c.nodes = static_cast<int>(whole(platform, "nodes", 1));
  c.node_threads = static_cast<int>(whole(platform, "node_threads", 1));
  c.stripe = static_cast<std::uint64_t>(whole(platform, "stripe", 1, kInt64Max));
  const Reader disk = platform.child("disk");
  c.disk.peak_bw = positive(disk, "peak_bw");
  c.disk.contention = disk.number("contention");
  if (c.disk.contention < 0) disk.fail("contention", "must be a number >= 0");
  c.disk.size_half = positive(disk, "size_half");
  const Reader fwd = root.child("forwarding");
  c.forwarding = fwd.boolean("enabled");
  c.scheduler = fwd.string("scheduler");
  const Reader options = fwd.child("options");
  for (const auto& key : options.keys()) c.options[key] = options.string(key);
  try {  // a bad scheduler name or option fails here, before SimGrid starts
    (void)core::requests::make_request_scheduler(c.scheduler, node_options(c, 0));
  } catch (const std::invalid_argument& e) {
    fwd.fail("scheduler", e.what());
  }
  bool any_active = false;
  for (const Reader& a : root.objects("apps")) {
    AppConfig app;
    app.name = a.string("name");
    app.clients = static_cast<int>(whole(a, "clients", 1));
    app.pattern = a.parsed("pattern", parse_pattern);
    app.op = a.parsed("op", parse_op);
    app.request = static_cast<std::uint64_t>(whole(a, "request", 1, kInt64Max));
    app.requests = static_cast<int>(whole(a, "requests", 1));
    if (a.has("idle")) app.idle = a.boolean("idle");
    any_active = any_active || !app.idle;
    c.apps.push_back(app);
  }
  if (!any_active) root.fail("apps", "at least one application must not be idle");
  document.check_all_read();
  return c;
}

core::requests::Options node_options(const Config& config, int node) {
  core::requests::Options options = config.options;
  options["twins.servers"] = std::to_string(config.servers);
  options["twins.node"] = std::to_string(node);
  return options;
}

core::DeviceModel disk_device(const DiskConfig& disk, int streams) {
  std::vector<std::pair<int, double>> curve;
  for (int n = 1; n <= std::max(streams, 1); ++n)
    curve.emplace_back(n, disk_capacity(disk, n) / disk.peak_bw);
  return core::DeviceModel::from_curve("disk", disk.peak_bw, disk.peak_bw, 1, curve);
}

std::vector<ClientRequest> client_requests(const AppConfig& app, int app_index, int rank) {
  // Files: application k owns handles starting at k << 32; file-per-process adds the rank.
  const auto base = static_cast<core::requests::FileHandle>(app_index) << 32;
  const auto n = static_cast<std::uint64_t>(app.requests);
  const auto r = static_cast<std::uint64_t>(rank);
  const auto clients = static_cast<std::uint64_t>(app.clients);
  std::vector<ClientRequest> out;
  out.reserve(n);
  for (std::uint64_t j = 0; j < n; ++j) {
    switch (app.pattern) {
      case Pattern::FilePerProcess:
        out.push_back({base + r, j * app.request, app.request});
        break;
      case Pattern::SharedContiguous:  // each client its own contiguous block of the file
        out.push_back({base, (r * n + j) * app.request, app.request});
        break;
      case Pattern::SharedStrided:  // request j of every client, side by side: 1D strided
        out.push_back({base, (j * clients + r) * app.request, app.request});
        break;
    }
  }
  return out;
}

std::map<int, std::uint64_t> Striping::split(core::requests::FileHandle file, std::uint64_t offset,
                                             std::uint64_t length) const {
  std::map<int, std::uint64_t> out;
  while (length > 0) {
    const std::uint64_t in_stripe = std::min(length, stripe - offset % stripe);
    out[server_of(file, offset)] += in_stripe;
    offset += in_stripe;
    length -= in_stripe;
  }
  return out;
}

double disk_capacity(const DiskConfig& disk, int streams) {
  return disk.peak_bw / (1.0 + disk.contention * std::max(0, streams - 1));
}

double size_efficiency(const DiskConfig& disk, double bytes) {
  return bytes / (bytes + disk.size_half);
}

}  // namespace harmonia::fwdsim
