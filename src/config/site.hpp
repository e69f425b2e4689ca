#pragma once
/// @file The site configuration of harmonia-schedd and harmonia-bbd (/etc/harmonia/harmonia.toml):
/// every setting of both daemons, declared once (common/settings.hpp) and bound to the
/// structures the daemons run with. docs/configuration.md's table is generated from it.
/// Only the scheduler's configuration structures (headers) are used, never its code: the node
/// links no part of the scheduler.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/settings.hpp"
#include "core/pricing.hpp"
#include "schedd/buffers.hpp"
#include "schedd/server.hpp"
#include "schedd/service.hpp"

namespace harmonia::config {

/// harmonia-schedd's own settings, beyond those of its structures.
struct SchedulerSettings {
  schedd::ServiceConfig service;
  schedd::ServerConfig server;
  schedd::BufferConfig buffers;
  int buffer_count = 0;  ///< 0: no buffer nodes (the coordination strategy alone)
  std::string flush_order = "free";
  std::vector<std::string> io_classes;  ///< NAME:SLOWDOWN:USAGE_FACTOR
  std::string record, accounting;
  std::string metrics;  ///< HOST:PORT of the metrics endpoint ("" : none)
};

/// harmonia-bbd's settings.
struct NodeSettings {
  std::string device, pfs;
  std::uint64_t capacity = 1ULL << 30;
  std::string listen = "127.0.0.1:0";
  std::string advertise;
  std::string schedd;
  double threshold = 0.5;
  std::string drain_scheduler = "fifo";
  std::string sync = "none";
  unsigned max_connections = 0;  ///< 0: half the descriptor limit, at most 512
  double idle_timeout = 300;
  std::string metrics;
};

/// What both daemons share: identity and logging.
struct SharedSettings {
  std::string auth = "peer";
  std::string munge_socket;  ///< "" : $HARMONIA_MUNGE_SOCKET, else munged's own
  double auth_window = 60;
  std::vector<uid_t> admin_uids;
  std::string log_target = "stderr";
  std::string log_level = "info";
};

struct Site {
  Site();
  SchedulerSettings scheduler;
  NodeSettings node;
  SharedSettings shared;
};

/// The names the policy core registers, for the settings that choose among them. The scheduler
/// and harmonia-describe pass the registries' names; a node, which links no part of the
/// scheduler, passes none: it then checks those settings' type but not their names (the
/// scheduler does when it starts).
struct Names {
  std::vector<std::string> strategies, flush_orders, policies, auto_objectives;
  /// The registered names (core/registry.hpp and friends).
  static Names registered();
};

/// Every setting of the site file, bound to `site` (which must outlive the result); `names`
/// for the choices that are the policy core's.
common::Settings declare(Site& site, const Names& names);

/// An I/O class NAME:SLOWDOWN:USAGE_FACTOR, or nothing and why.
std::optional<core::IoClass> parse_io_class(const std::string& text, std::string& why);

}  // namespace harmonia::config
