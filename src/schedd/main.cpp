// harmonia-schedd: the scheduler daemon of the coordination service (docs/control.md).
#include <google/protobuf/stubs/logging.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "common/accounting.hpp"
#include "common/identity.hpp"
#include "common/size.hpp"
#include "common/write_atomically.hpp"
#include "core/lookahead.hpp"
#include "schedd/server.hpp"

using namespace harmonia::schedd;
namespace coord = harmonia::core::coordination;

namespace {

/// Buffer nodes and PFS servers a daemon is sized for (state, replies and partitions grow with
/// them): larger counts are refused by the option parser, not by a failed allocation.
constexpr int kMaxBuffers = 4096;
constexpr int kMaxPfsServers = 65536;  // as the site file (python/harmonia/coordination.py)

/// An --io-class NAME:SLOWDOWN:USAGE_FACTOR, or nothing and why.
std::optional<harmonia::core::IoClass> parse_io_class(const std::string& text, std::string& why) {
  const auto first = text.find(':');
  const auto second = first == std::string::npos ? first : text.find(':', first + 1);
  if (second == std::string::npos || text.find(':', second + 1) != std::string::npos) {
    why = "expected NAME:SLOWDOWN:USAGE_FACTOR";
    return std::nullopt;
  }
  harmonia::core::IoClass out{text.substr(0, first), 0, 0};
  try {
    size_t used = 0;
    const std::string slowdown = text.substr(first + 1, second - first - 1);
    const std::string factor = text.substr(second + 1);
    out.slowdown = std::stod(slowdown, &used);
    if (used != slowdown.size()) throw std::invalid_argument(slowdown);
    out.usage_factor = std::stod(factor, &used);
    if (used != factor.size()) throw std::invalid_argument(factor);
  } catch (const std::exception&) {
    why = "SLOWDOWN and USAGE_FACTOR must be numbers";
    return std::nullopt;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Harmonia scheduler daemon: coordinates the I/O of jobs running libharmonia"};
  ServiceConfig service;
  ServerConfig server;
  std::string flush_order = "free";
  cli.add_option("--socket", server.unix_path, "Listen on this Unix socket");
  cli.add_option("--tcp", server.tcp, "Listen on HOST:PORT (port 0: any free port, printed)");
  cli.add_option("--strategy", service.strategy,
                 "Coordination strategy: none, 1a, 1b, 2a, 2b, 3a, 3b, throttle")
      ->capture_default_str();
  cli.add_option("--flush-order", flush_order, "free, token, window or priority")
      ->capture_default_str();
  cli.add_option("--window", service.coordinator.window_seconds, "Flush window, seconds")
      ->capture_default_str();
  cli.add_option("--pfs-servers", service.coordinator.pfs_servers, "PFS servers to partition")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxPfsServers));
  cli.add_option("--throttle-gap", service.coordinator.throttle_gap,
                 "Seconds between writes of throttled jobs")
      ->capture_default_str();
  cli.add_option("--max-token-seconds", service.coordinator.max_token_seconds,
                 "Flush token held longer than this while others wait: it passes on (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  cli.add_option("--max-ranks", service.max_ranks, "Most processes a job may declare")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1U << 30));
  cli.add_option("--lease", service.lease_seconds, "Seconds a silent process keeps its place")
      ->capture_default_str();
  cli.add_option("--tick", server.tick_seconds, "Seconds between timer checks")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10.0));
  std::string max_output = "256M";
  cli.add_option("--max-output", max_output,
                 "Replies queued for all clients together (at least 1M): past it, the client "
                 "holding the most unread output is disconnected")
      ->capture_default_str();
  BufferConfig buffers;
  int buffer_count = 0;
  std::string capacity = "1G", stripe = "1M", phase = "64M", record;
  auto* group = cli.add_option_group("Buffer nodes", "docs/buffer-nodes.md");
  group
      ->add_option("--buffers", buffer_count,
                   "Buffer nodes (harmonia-bbd --schedd) to place on (0: none)")
      ->check(CLI::Range(0, kMaxBuffers));
  group
      ->add_option("--policy", buffers.policy,
                   "datawarp, max-buffer-efficiency, priority, max-bandwidth, fairness, "
                   "min-stall; peers: fair-share, io-sets, themisio-job, themisio-user, "
                   "themisio-size, slurm-easy; auto (chooses among them per window)")
      ->capture_default_str();
  group->add_option("--buffer-capacity", capacity, "Bytes per node")->capture_default_str();
  group->add_option("--buffer-write-bw", buffers.write_bw, "A node's device, bytes/s")
      ->capture_default_str();
  group->add_option("--buffer-read-bw", buffers.read_bw, "bytes/s")->capture_default_str();
  group->add_option("--buffer-concurrency", buffers.concurrency, "Device queue depth")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  group
      ->add_option("--interference-slope", buffers.interference_slope,
                   "I_f(n) = 1 + slope (n - 1), from the device's profile")
      ->capture_default_str();
  group->add_option("--link-bw", buffers.link_bw, "Network into a node, bytes/s")
      ->capture_default_str();
  group
      ->add_option("--flush-threshold", buffers.flush_threshold,
                   "Used share at which a node drains")
      ->capture_default_str();
  group
      ->add_option("--backup-flushers", buffers.backup_flushers,
                   "Nodes that may drain exclusively at once (section V-D)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxBuffers));
  group
      ->add_option("--max-colocated", buffers.max_colocated,
                   "Phases per node at most (default: from the interference limit)")
      ->check(CLI::Range(1, 1 << 20));
  group
      ->add_option("--max-running-apps", buffers.max_running_apps,
                   "Jobs the policy runs at once, the others wait in line (0: no limit; "
                   "default: the policy's, docs/scheduling-model.md)")
      ->check(CLI::Range(0, 1 << 20));
  group->add_option("--min-buffers", buffers.min_buffers, "Nodes per phase at least")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxBuffers));
  group
      ->add_option("--auto-objective", buffers.auto_objective,
                   "auto: what it minimises (makespan, mean_completion, stall, slowdown)")
      ->capture_default_str()
      ->check(CLI::IsMember(harmonia::core::auto_objective_names()));
  group->add_flag("--extend-reservations", buffers.extend_reservations,
                  "datawarp: a job writing past its reservation gets a temporary extension");
  std::string max_phase = "0";
  group
      ->add_option("--max-phase-bytes", max_phase,
                   "Most one job's phase may ask for, whatever it declares (0: no bound but "
                   "--max-phase-share's)")
      ->capture_default_str();
  group
      ->add_option("--max-phase-share", buffers.max_phase_share,
                   "Share of all buffers one job's phase may have at most, in bytes and in nodes "
                   "(rounded up) (fair admission: no job holds every buffer while others wait; "
                   "1: all of them)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  group->add_option("--phase-bytes", phase, "Per process, for phases that declare no size")
      ->capture_default_str();
  group->add_option("--stripe", stripe, "Stripe unit over a phase's nodes")->capture_default_str();
  std::string stage_in_rate = "16M";
  group
      ->add_option("--stage-in-grace", buffers.stage_in_grace,
                   "Seconds a node's part of a stage-in may take beyond its bytes at "
                   "--stage-in-min-rate; later, its files are read from the PFS")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  group
      ->add_option("--stage-in-min-rate", stage_in_rate,
                   "Bytes per second a node's stage-in must reach at least (a size, e.g. 16M)")
      ->capture_default_str();
  group->add_option("--record", record,
                    "Write the policy's per-job metrics (JSON) here when stopped");
  std::string accounting;
  std::vector<std::string> io_classes;
  group->add_option("--accounting", accounting,
                    "Write one accounting record per job to PREFIX.json and PREFIX.csv, every "
                    "second while running and when stopped (docs/accounting.md)");
  group
      ->add_option("--node-hour-rate", buffers.pricing.node_hour_rate,
                   "Billing units per node-hour")
      ->capture_default_str();
  group->add_option("--io-class", io_classes,
                    "NAME:SLOWDOWN:USAGE_FACTOR, an I/O service class jobs name with "
                    "HARMONIA_IO_QOS (repeatable; replaces normal:1:1, relaxed:2:0.7, "
                    "scavenger:4:0.5)");
  group->add_option("--buffer-node-uid", service.node_uids,
                    "A user whose processes may register buffer nodes on the Unix socket "
                    "(repeatable; root always may, and so does this daemon's own user)");
  std::string auth = "peer", munge_socket = harmonia::common::munge_socket_from_environment();
  double auth_window = 60;
  auto* identity = cli.add_option_group("Identity", "docs/security.md");
  identity
      ->add_option("--auth", auth,
                   "How a connection's user is known: peer (from the kernel: Unix-socket peers, "
                   "and TCP peers on this host; --tcp must then be a loopback address) or munge "
                   "(TCP peers on other hosts authenticate with a MUNGE credential first)")
      ->check(CLI::IsMember({"peer", "munge"}))
      ->capture_default_str();
  identity->add_option("--munge-socket", munge_socket,
                       "munged's socket (default: HARMONIA_MUNGE_SOCKET, else munged's own)");
  identity
      ->add_option("--auth-window", auth_window,
                   "Seconds a MUNGE credential is accepted after its making")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  identity->add_option("--admin-uid", service.admins.uids,
                       "A user who may act for any job (repeatable; root always may)");
  CLI11_PARSE(cli, argc, argv);
  server.tcp_credentials = auth == "munge";
  server.admins = service.admins;
  auto checker = std::make_shared<harmonia::common::CredentialChecker>("harmonia-schedd",
                                                                       munge_socket, auth_window);
  // Clients over TCP send a credential wherever munged makes one, also where the kernel names
  // them: it may confirm their user there, never name another.
  service.confirm_credential = [checker](uid_t known, const std::string& credential,
                                         std::string& why) {
    return checker->confirms(known, credential, why);
  };
  if (auth == "munge")
    service.check_credential = [checker](const std::string& credential, std::string& why) {
      return checker->check(credential, why);
    };
  const auto output_cap = harmonia::common::parse_size(max_output);
  if (!output_cap || *output_cap < (1U << 20)) {
    std::fprintf(stderr, "harmonia-schedd: --max-output %s: expected a size of at least 1M\n",
                 max_output.c_str());
    return 2;
  }
  server.max_output_bytes = static_cast<size_t>(*output_cap);
  service.node_uids.push_back(geteuid());
  if (buffer_count > 0) {
    const auto bytes = harmonia::common::parse_size(capacity);
    const auto unit = harmonia::common::parse_size(stripe);
    const auto per_phase = harmonia::common::parse_size(phase);
    if (!bytes || !unit || !per_phase) {
      std::fprintf(stderr,
                   "harmonia-schedd: --buffer-capacity, --stripe and --phase-bytes take sizes such "
                   "as 64M or 1G\n");
      return 2;
    }
    const auto rate = harmonia::common::parse_size(stage_in_rate);
    if (!rate || *rate == 0) {
      std::fprintf(stderr,
                   "harmonia-schedd: --stage-in-min-rate %s: expected a size per second above 0, "
                   "e.g. 16M\n",
                   stage_in_rate.c_str());
      return 2;
    }
    buffers.stage_in_min_rate = static_cast<double>(*rate);
    buffers.count = buffer_count;
    buffers.capacity = static_cast<double>(*bytes);
    buffers.stripe_bytes = *unit;
    buffers.phase_bytes = static_cast<double>(*per_phase);
    if (max_phase != "0") {
      const auto bound = harmonia::common::parse_size(max_phase);
      if (!bound) {
        std::fprintf(stderr,
                     "harmonia-schedd: --max-phase-bytes %s: expected 0 or a size such as 64G\n",
                     max_phase.c_str());
        return 2;
      }
      buffers.max_phase_bytes = static_cast<double>(*bound);
    }
    service.buffers = buffers;
  } else if (!record.empty() || !accounting.empty()) {
    std::fprintf(stderr, "harmonia-schedd: --record and --accounting need --buffers\n");
    return 2;
  }
  if (!io_classes.empty()) {
    buffers.pricing.classes.clear();
    for (const auto& text : io_classes) {
      std::string why;
      const auto io_class = parse_io_class(text, why);
      if (!io_class) {
        std::fprintf(stderr, "harmonia-schedd: --io-class %s: %s\n", text.c_str(), why.c_str());
        return 2;
      }
      buffers.pricing.classes.push_back(*io_class);
    }
  }
  if (service.buffers) service.buffers->pricing = buffers.pricing;

  // One descriptor per connected process: 10,000 jobs need more than the usual 1024.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  // Malformed frames get an error reply; libprotobuf's own log line for each would let any
  // client fill the daemon's log.
  google::protobuf::SetLogHandler(nullptr);
  try {
    service.coordinator.flush_order = coord::parse_flush_order(flush_order);
    Service state(service, monotonic_seconds());
    // Accounting times are Unix times: the daemon's clock is monotonic.
    const double clock_offset =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
        monotonic_seconds();
    double accounted_at = -1;
    bool accounting_failed = false;
    const auto write_accounting = [&](double now) {
      try {
        harmonia::common::write_accounting(accounting, state.accounting(now, clock_offset));
        accounting_failed = false;
      } catch (const std::exception& error) {
        // A full or read-only disk must not stop the scheduling: said once, retried each second.
        if (!accounting_failed)
          std::fprintf(stderr, "harmonia-schedd: --accounting: %s\n", error.what());
        accounting_failed = true;
      }
      accounted_at = now;
    };
    if (!accounting.empty())
      server.after_tick = [&](double now) {
        if (now - accounted_at >= 1) write_accounting(now);
      };
    Server listener(state, server);
    if (!server.tcp.empty()) std::printf("tcp_port=%u\n", listener.tcp_port());
    std::fprintf(
        stderr, "harmonia-schedd: listening%s%s%s (strategy %s, flush order %s%s%s; auth %s)\n",
        server.unix_path.empty() ? "" : " on ", server.unix_path.c_str(),
        server.tcp.empty() ? "" : (" on tcp " + server.tcp).c_str(), service.strategy.c_str(),
        flush_order.c_str(), service.buffers ? ", buffer policy " : "",
        service.buffers ? service.buffers->policy.c_str() : "", auth.c_str());
    std::fflush(stdout);
    listener.run();
    if (!record.empty()) harmonia::common::write_atomically(record, state.buffer_results());
    if (!accounting.empty()) write_accounting(monotonic_seconds());
    std::fprintf(stderr, "harmonia-schedd: stopped\n");
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "harmonia-schedd: out of memory\n");
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-schedd: %s\n", error.what());
    return 2;
  }
  return 0;
}
