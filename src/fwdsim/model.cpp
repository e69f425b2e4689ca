#include "fwdsim/model.hpp"

#include <algorithm>
#include <stdexcept>

namespace harmonia::fwdsim {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw std::invalid_argument(key + ": " + why);
}

const json& need(const json& table, const std::string& key, const std::string& path) {
  if (!table.contains(key)) bad(path + key, "missing");
  return table.at(key);
}

double positive(const json& table, const std::string& key, const std::string& path) {
  const json& v = need(table, key, path);
  if (!v.is_number() || !(v.get<double>() > 0)) bad(path + key, "must be a number > 0");
  return v.get<double>();
}

std::string text(const json& table, const std::string& key, const std::string& path) {
  const json& v = need(table, key, path);
  if (!v.is_string()) bad(path + key, "must be a string");
  return v.get<std::string>();
}

long whole(const json& table, const std::string& key, const std::string& path, long low) {
  const json& v = need(table, key, path);
  if (!v.is_number_integer() || v.get<long>() < low)
    bad(path + key, "must be an integer >= " + std::to_string(low));
  return v.get<long>();
}

}  // namespace

Config parse_config(const json& d) {
  if (!d.is_object()) bad("(document)", "must be a JSON object");
  Config c;
  c.seed = static_cast<std::uint64_t>(whole(d, "seed", "", 0));
  const json& platform = need(d, "platform", "");
  c.link_bw = positive(platform, "link_bw", "platform.");
  c.servers = static_cast<int>(whole(platform, "servers", "platform.", 1));
  c.nodes = static_cast<int>(whole(platform, "nodes", "platform.", 1));
  c.node_threads = static_cast<int>(whole(platform, "node_threads", "platform.", 1));
  c.stripe = static_cast<std::uint64_t>(whole(platform, "stripe", "platform.", 1));
  const json& disk = need(platform, "disk", "platform.");
  c.disk.peak_bw = positive(disk, "peak_bw", "platform.disk.");
  const json& contention = need(disk, "contention", "platform.disk.");
  if (!contention.is_number() || contention.get<double>() < 0)
    bad("platform.disk.contention", "must be a number >= 0");
  c.disk.contention = contention.get<double>();
  c.disk.size_half = positive(disk, "size_half", "platform.disk.");
  const json& fwd = need(d, "forwarding", "");
  const json& enabled = need(fwd, "enabled", "forwarding.");
  if (!enabled.is_boolean()) bad("forwarding.enabled", "must be true or false");
  c.forwarding = enabled.get<bool>();
  c.scheduler = text(fwd, "scheduler", "forwarding.");
  for (const auto& [key, value] : need(fwd, "options", "forwarding.").items()) {
    if (!value.is_string()) bad("forwarding.options." + key, "must be a string");
    c.options[key] = value.get<std::string>();
  }
  const json& apps = need(d, "apps", "");
  if (!apps.is_array() || apps.empty()) bad("apps", "must be a non-empty list");
  bool any_active = false;
  for (size_t i = 0; i < apps.size(); ++i) {
    const std::string at = "apps[" + std::to_string(i) + "].";
    const json& a = apps[i];
    AppConfig app;
    app.name = text(a, "name", at);
    app.clients = static_cast<int>(whole(a, "clients", at, 1));
    const std::string pattern = text(a, "pattern", at);
    if (pattern == "file-per-process")
      app.pattern = Pattern::FilePerProcess;
    else if (pattern == "shared-contiguous")
      app.pattern = Pattern::SharedContiguous;
    else if (pattern == "shared-strided")
      app.pattern = Pattern::SharedStrided;
    else
      bad(at + "pattern", "must be file-per-process, shared-contiguous or shared-strided");
    const std::string op = text(a, "op", at);
    if (op != "read" && op != "write") bad(at + "op", "must be read or write");
    app.op = op == "read" ? core::Op::Read : core::Op::Write;
    app.request = static_cast<std::uint64_t>(whole(a, "request", at, 1));
    app.requests = static_cast<int>(whole(a, "requests", at, 1));
    if (a.contains("idle")) {
      if (!a.at("idle").is_boolean()) bad(at + "idle", "must be true or false");
      app.idle = a.at("idle").get<bool>();
    }
    any_active = any_active || !app.idle;
    c.apps.push_back(app);
  }
  if (!any_active) bad("apps", "at least one application must not be idle");
  return c;
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
