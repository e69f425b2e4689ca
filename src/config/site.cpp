#include "config/site.hpp"

#include "common/identity.hpp"
#include "core/requests/registry.hpp"

namespace harmonia::config {

namespace {

/// Buffer nodes and PFS servers a daemon is sized for (state, replies and partitions grow with
/// them): larger counts are refused, not left to a failed allocation.
constexpr int kMaxBuffers = 4096;
constexpr int kMaxPfsServers = 65536;
constexpr double kDay = 86400;
constexpr double kLargestSize = 0x1p62;  // as common::parse_size

}  // namespace

Site::Site() {
  scheduler.buffers.capacity = 1 << 30;
  scheduler.buffers.phase_bytes = 64 << 20;
  shared.munge_socket = common::munge_socket_from_environment();
}

std::optional<core::IoClass> parse_io_class(const std::string& text, std::string& why) {
  const auto first = text.find(':');
  const auto second = first == std::string::npos ? first : text.find(':', first + 1);
  if (second == std::string::npos || text.find(':', second + 1) != std::string::npos) {
    why = "expected NAME:SLOWDOWN:USAGE_FACTOR, got \"" + text + "\"";
    return std::nullopt;
  }
  core::IoClass out{text.substr(0, first), 0, 0};
  try {
    size_t used = 0;
    const std::string slowdown = text.substr(first + 1, second - first - 1);
    const std::string factor = text.substr(second + 1);
    out.slowdown = std::stod(slowdown, &used);
    if (used != slowdown.size()) throw std::invalid_argument(slowdown);
    out.usage_factor = std::stod(factor, &used);
    if (used != factor.size()) throw std::invalid_argument(factor);
  } catch (const std::exception&) {
    why = "SLOWDOWN and USAGE_FACTOR must be numbers, got \"" + text + "\"";
    return std::nullopt;
  }
  return out;
}

common::Settings declare(Site& site, const Names& names) {
  using namespace common;
  Settings s;
  auto& sched = site.scheduler;
  auto& service = sched.service;
  auto& coordinator = service.coordinator;
  auto& buffers = sched.buffers;
  auto& node = site.node;
  auto& shared = site.shared;

  // [schedd]: the scheduler daemon.
  s.add("schedd.socket", "--socket", kSchedd, text(sched.server.unix_path),
        "Listen on this Unix socket (\"\": none)");
  s.add("schedd.tcp", "--tcp", kSchedd, text(sched.server.tcp),
        "Listen on HOST:PORT (port 0: any free port, printed as tcp_port=N); a loopback address "
        "unless auth.mode is munge");
  s.add("schedd.strategy", "--strategy", kSchedd, choice(service.strategy, names.strategies),
        "Coordination strategy");
  s.add("schedd.flush_order", "--flush-order", kSchedd,
        choice(sched.flush_order, names.flush_orders), "Which waiting job flushes next");
  s.add("schedd.window", "--window", kSchedd,
        number(coordinator.window_seconds, 0.001, kDay, "seconds"),
        "Flush window (flush_order window), seconds");
  s.add("schedd.pfs_servers", "--pfs-servers", kSchedd,
        integer(coordinator.pfs_servers, 1, kMaxPfsServers), "PFS servers 3a and 3b partition");
  s.add("schedd.throttle_gap", "--throttle-gap", kSchedd,
        number(coordinator.throttle_gap, 1e-6, 10, "seconds"),
        "Seconds between writes of throttled jobs");
  s.add("schedd.lease", "--lease", kSchedd, number(service.lease_seconds, 0.01, 3600, "seconds"),
        "Seconds a silent process keeps its place");
  s.add("schedd.tick", "--tick", kSchedd, number(sched.server.tick_seconds, 0.001, 10, "seconds"),
        "Seconds between timer checks (windows, leases)");
  s.add("schedd.record", "--record", kSchedd, text(sched.record),
        "Write the buffer policy's per-job metrics (JSON) here when stopped (needs buffer nodes)");
  s.add("schedd.accounting", "--accounting", kSchedd, text(sched.accounting),
        "Write one accounting record per job to PREFIX.json and PREFIX.csv, every second and when "
        "stopped (needs buffer nodes; docs/accounting.md)");
  s.add("schedd.metrics", "--metrics", kSchedd, text(sched.metrics),
        "Serve OpenMetrics on HOST:PORT at /metrics (\"\": off; docs/deploy.md)");

  // [policy]: the burst-buffer policy that places phases on the buffer nodes.
  s.add("policy.buffers", "--buffers", kSchedd, integer(sched.buffer_count, 0, kMaxBuffers),
        "Buffer nodes (harmonia-bbd --schedd) to place on (0: none, the strategy alone)");
  s.add("policy.name", "--policy", kSchedd, choice(buffers.policy, names.policies),
        "Burst-buffer policy (harmonia describe lists them by family)");
  s.add("policy.capacity", "--buffer-capacity", kSchedd, size(buffers.capacity, 1, kLargestSize),
        "Bytes per node");
  s.add("policy.write_bw", "--buffer-write-bw", kSchedd,
        size(buffers.write_bw, 1, kLargestSize, "bytes/s"), "A node's device writes, bytes/s");
  s.add("policy.read_bw", "--buffer-read-bw", kSchedd,
        size(buffers.read_bw, 1, kLargestSize, "bytes/s"), "A node's device reads, bytes/s");
  s.add("policy.concurrency", "--buffer-concurrency", kSchedd,
        integer(buffers.concurrency, 1, 1 << 20), "A node's device queue depth");
  s.add("policy.interference_slope", "--interference-slope", kSchedd,
        number(buffers.interference_slope, 0, 100, ""),
        "I_f(n) = 1 + slope (n - 1), from the device's profile");
  s.add("policy.link_bw", "--link-bw", kSchedd, size(buffers.link_bw, 1, kLargestSize, "bytes/s"),
        "Network into a node, bytes/s");
  s.add("policy.flush_threshold", "--flush-threshold", kSchedd,
        number(buffers.flush_threshold, 0, 1, ""), "Used share at which a node drains");
  s.add("policy.backup_flushers", "--backup-flushers", kSchedd,
        integer(buffers.backup_flushers, 0, kMaxBuffers),
        "Nodes that may drain exclusively at once (section V-D)");
  s.add("policy.max_colocated", "--max-colocated", kSchedd,
        optional_integer(buffers.max_colocated, 1, 1 << 20, "from the interference limit"),
        "Phases per node at most");
  s.add("policy.max_running_apps", "--max-running-apps", kSchedd,
        optional_integer(buffers.max_running_apps, 0, 1 << 20,
                         "the policy's, docs/scheduling-model.md"),
        "Jobs the policy runs at once, the others wait in line (0: no limit)");
  s.add("policy.min_buffers", "--min-buffers", kSchedd,
        integer(buffers.min_buffers, 1, kMaxBuffers), "Nodes per phase at least");
  s.add("policy.auto_objective", "--auto-objective", kSchedd,
        choice(buffers.auto_objective, names.auto_objectives), "What the auto policy minimises");
  s.add("policy.extend_reservations", "--extend-reservations", kSchedd,
        flag(buffers.extend_reservations),
        "datawarp: a job writing past its reservation gets a temporary extension");
  s.add("policy.phase_bytes", "--phase-bytes", kSchedd, size(buffers.phase_bytes, 1, kLargestSize),
        "Bytes per process, for phases that declare no size");
  s.add("policy.stripe", "--stripe", kSchedd, size(buffers.stripe_bytes, 1, kLargestSize),
        "Stripe unit over a phase's nodes");
  s.add("policy.stage_in_grace", "--stage-in-grace", kSchedd,
        number(buffers.stage_in_grace, 0, kDay, "seconds"),
        "Seconds a node's part of a stage-in may take beyond its bytes at stage_in_min_rate; "
        "later, its files are read from the PFS");
  s.add("policy.stage_in_min_rate", "--stage-in-min-rate", kSchedd,
        size(buffers.stage_in_min_rate, 1, kLargestSize, "bytes/s"),
        "Bytes per second a node's stage-in must reach at least");
  s.add("policy.node_hour_rate", "--node-hour-rate", kSchedd,
        number(buffers.pricing.node_hour_rate, 0, 1e12, ""), "Billing units per node-hour");
  s.add("policy.io_classes", "--io-class", kSchedd,
        texts(sched.io_classes,
              [](const std::string& text) {
                std::string why;
                return parse_io_class(text, why) ? std::string() : why;
              }),
        "NAME:SLOWDOWN:USAGE_FACTOR, an I/O service class jobs name with HARMONIA_IO_QOS "
        "(repeatable; replaces normal:1:1, relaxed:2:0.7, scavenger:4:0.5)");

  // [bbd]: a buffer node.
  s.add("bbd.device", "--device", kNode, text(node.device),
        "Directory on the node's device for the logs (and stage-in/: copies of read phases' "
        "files, emptied at start); required");
  s.add("bbd.pfs", "--pfs", kNode, text(node.pfs), "PFS directory drained files go to; required");
  s.add("bbd.capacity", "--capacity", kNode, size(node.capacity, 4096, kLargestSize),
        "Bytes held at most");
  s.add("bbd.listen", "--listen", kNode, text(node.listen),
        "HOST:PORT clients reach the node at (port 0: any, printed as port=N); a loopback "
        "address unless auth.mode is munge");
  s.add("bbd.advertise", "--advertise", kNode, text(node.advertise),
        "HOST:PORT clients reach this node at, as told to the scheduler (\"\": the listen "
        "address)");
  s.add("bbd.schedd", "--schedd", kNode, text(node.schedd),
        "Scheduler daemon to report to and take drain orders from (unix:PATH or tcp:HOST:PORT; "
        "\"\": none, the node drains at threshold)");
  s.add("bbd.threshold", "--threshold", kNode, number(node.threshold, 0, 1, ""),
        "Without a scheduler: drain once this share of the capacity is used (1: only when "
        "asked)");
  s.add("bbd.drain_scheduler", "--drain-scheduler", kNode,
        choice(node.drain_scheduler, core::requests::request_scheduler_names()),
        "Request scheduler that picks the next file to drain");
  s.add("bbd.sync", "--sync", kNode, choice(node.sync, {"none", "data"}),
        "When a write is acknowledged: none (in the page cache: survives a killed node) or data "
        "(fdatasync of the log first: survives a power loss)");
  s.add("bbd.metrics", "--metrics", kNode, text(node.metrics),
        "Serve OpenMetrics on HOST:PORT at /metrics (\"\": off; docs/deploy.md)");

  // [limits]: what no client may take (docs/limits.md).
  s.add("limits.max_output", "--max-output", kSchedd,
        size(sched.server.max_output_bytes, 1 << 20, kLargestSize),
        "Replies queued for all clients together: past it, the client holding the most unread "
        "output is disconnected");
  s.add("limits.max_ranks", "--max-ranks", kSchedd, integer(service.max_ranks, 1, 1 << 30),
        "Most processes a job may declare");
  s.add("limits.max_token_seconds", "--max-token-seconds", kSchedd,
        number(coordinator.max_token_seconds, 0, kDay, "seconds"),
        "A flush token held longer than this while others wait passes on (0: never)");
  s.add("limits.max_phase_bytes", "--max-phase-bytes", kSchedd,
        size(buffers.max_phase_bytes, 0, kLargestSize),
        "Most one job's phase may ask for, whatever it declares (0: no bound but "
        "max_phase_share's)");
  s.add("limits.max_phase_share", "--max-phase-share", kSchedd,
        number(buffers.max_phase_share, 0.01, 1, ""),
        "Share of all buffers one job's phase may have at most, in bytes and in nodes "
        "(rounded up) (1: all of them)");
  s.add("limits.max_connections", "--max-connections", kNode,
        integer(node.max_connections, 0, 1 << 20),
        "Client connections a node serves at once, two threads each (0: half the descriptor "
        "limit, at most 512)");
  s.add("limits.idle_timeout", "--idle-timeout", kNode,
        number(node.idle_timeout, 0, kDay, "seconds"),
        "Seconds a node's client connection may stay silent or leave a reply unread before it "
        "is closed (0: never)");

  // [auth]: who a request comes from (docs/security.md).
  s.add("auth.mode", "--auth", kBothDaemons, choice(shared.auth, {"peer", "munge"}),
        "How a connection's user is known: peer (from the kernel, for clients on this host) or "
        "munge (clients on other hosts send a MUNGE credential first)");
  s.add("auth.munge_socket", "--munge-socket", kBothDaemons, text(shared.munge_socket),
        "munged's socket (\"\": HARMONIA_MUNGE_SOCKET, else munged's own)");
  s.add("auth.window", "--auth-window", kBothDaemons,
        number(shared.auth_window, 1, 3600, "seconds"),
        "Seconds a MUNGE credential is accepted after its making");
  s.add("auth.admin_uids", "--admin-uid", kBothDaemons, uids(shared.admin_uids),
        "Users who may act for any job and file (repeatable; root always may)");
  s.add("auth.buffer_node_uids", "--buffer-node-uid", kSchedd, uids(service.node_uids),
        "Users whose processes may register buffer nodes (repeatable; root and the "
        "scheduler's own user always may)");

  // [log]
  s.add("log.target", "--log", kBothDaemons,
        choice(shared.log_target, {"stderr", "syslog", "json"}),
        "Where log lines go: stderr (the journal, under systemd), syslog, or json (one JSON "
        "object a line on stderr)");
  s.add("log.level", "--log-level", kBothDaemons,
        choice(shared.log_level, {"debug", "info", "warning", "error"}),
        "The least severe lines logged");
  return s;
}

}  // namespace harmonia::config
