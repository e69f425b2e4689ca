// harmonia-schedd: the scheduler daemon of the coordination service (docs/control.md).
#include <google/protobuf/stubs/logging.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "schedd/server.hpp"

using namespace harmonia::schedd;
namespace coord = harmonia::core::coordination;

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
      ->capture_default_str();
  cli.add_option("--throttle-gap", service.coordinator.throttle_gap,
                 "Seconds between writes of throttled jobs")
      ->capture_default_str();
  cli.add_option("--lease", service.lease_seconds, "Seconds a silent process keeps its place")
      ->capture_default_str();
  cli.add_option("--tick", server.tick_seconds, "Seconds between timer checks")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10.0));
  CLI11_PARSE(cli, argc, argv);

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
    Server listener(state, server);
    if (!server.tcp.empty()) std::printf("tcp_port=%u\n", listener.tcp_port());
    std::fprintf(stderr, "harmonia-schedd: listening%s%s%s (strategy %s, flush order %s)\n",
                 server.unix_path.empty() ? "" : " on ", server.unix_path.c_str(),
                 server.tcp.empty() ? "" : (" on tcp " + server.tcp).c_str(),
                 service.strategy.c_str(), flush_order.c_str());
    std::fflush(stdout);
    listener.run();
    std::fprintf(stderr, "harmonia-schedd: stopped\n");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-schedd: %s\n", error.what());
    return 2;
  }
  return 0;
}
