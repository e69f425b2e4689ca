// Closed-form checks of the packet-level network (docs/network-interference.md, "Packet-level
// mode"): `netsim_packet_checks CASE` runs one case and exits 0 when it holds. SimGrid and ns-3
// allow one simulation per process, so every simulation runs in a child process of its own.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "netsim/config.hpp"
#include "netsim/fabric.hpp"
#include "netsim/placement.hpp"
#include "netsim/simulation.hpp"
#include "simkit/engine.hpp"

using namespace harmonia::netsim;

namespace {

constexpr double kLinkBw = 12.5e9;
constexpr double kHop = 100e-9;
constexpr double kPacket = 4096;
constexpr double kWindow = 131072;
// Bytes on the wire around a segment's payload: IPv4 20, TCP 20, PPP 2. A SYN carries 8 more
// (TCP options); an acknowledgement is headers only.
constexpr double kHeaders = 42;
constexpr double kSyn = 50;
constexpr double kAck = 42;
// ns-3 counts time in whole nanoseconds: each transmission time is rounded to one.
constexpr double kTick = 1e-9;

char* g_program = nullptr;

struct Case {
  std::vector<unsigned> down, up;
  std::vector<long> servers, io_clients, mpi_clients;
  JobConfig mpi, io;
};

JobConfig job(double size, long samples, bool finite, double interval = 0) {
  JobConfig j;
  j.enabled = true;
  j.size = size;
  j.pacing.interval = interval;
  j.pacing.jitter = 0;
  j.warmup = 0;
  j.samples = samples;
  j.finite = finite;
  return j;
}

struct Latencies {
  std::vector<double> mpi, io;
};

/// The recorded latencies of one simulation of `c`, run in a child process and handed back
/// through a pipe (MPI's, then I/O's, after their counts).
Latencies simulate(const Case& c, NetworkModel model) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    close(fds[0]);
    Config config;
    config.name = "check";
    config.down = c.down;
    config.up = c.up;
    config.link_bw = kLinkBw;
    config.hop_latency = kHop;
    config.model = model;
    config.packet = {kPacket, kWindow};
    config.servers = static_cast<long>(c.servers.size());
    config.mpi = c.mpi;
    config.io = c.io;
    config.link_loads = false;
    const Fabric fabric(c.down, c.up);
    Layout layout;
    layout.servers = c.servers;
    layout.io_clients = c.io_clients;
    layout.mpi_clients = c.mpi_clients;
    harmonia::simkit::Engine engine(g_program);
    Simulation simulation(config, fabric, layout);
    const RunResult result = simulation.run();
    std::vector<double> out{static_cast<double>(result.mpi.latencies.size())};
    out.insert(out.end(), result.mpi.latencies.begin(), result.mpi.latencies.end());
    out.insert(out.end(), result.io.latencies.begin(), result.io.latencies.end());
    const auto bytes = static_cast<ssize_t>(out.size() * sizeof(double));
    const bool written = write(fds[1], out.data(), static_cast<size_t>(bytes)) == bytes;
    if (result.packet_drops != 0) std::cerr << "packet drops: " << result.packet_drops << "\n";
    _exit(written && result.packet_drops == 0 ? 0 : 1);
  }
  close(fds[1]);
  std::vector<double> out;
  double value = 0;
  while (read(fds[0], &value, sizeof value) == static_cast<ssize_t>(sizeof value))
    out.push_back(value);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty())
    throw std::runtime_error("the simulation failed");
  const auto mpi_end = out.begin() + 1 + static_cast<long>(out.front());
  return {{out.begin() + 1, mpi_end}, {mpi_end, out.end()}};
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

/// Time to put `bytes` on a link.
double wire(double bytes) { return std::round(bytes / kLinkBw / kTick) * kTick; }

/// One transfer of `bytes` alone on a route of `hops` links: the TCP handshake (SYN and SYN-ACK
/// each cross the route), the acknowledgement that completes it, the segments pipelined behind
/// the first, the last one's trip, and the acknowledgement of the last segment coming back.
double one_transfer(double bytes, int hops) {
  const double segments = std::ceil(bytes / kPacket);
  const double last = bytes - (segments - 1) * kPacket + kHeaders;
  const double h = hops;
  return 2 * h * (wire(kSyn) + kHop) + wire(kAck) + (segments - 1) * wire(kPacket + kHeaders) +
         h * (wire(last) + kHop) + h * (wire(kAck) + kHop);
}

bool report(const std::string& what, double measured, double expected, double tolerance) {
  const bool ok = std::abs(measured - expected) <= tolerance;
  std::printf("%s: measured %.9g s, expected %.9g s (+/- %.3g): %s\n", what.c_str(), measured,
              expected, tolerance, ok ? "ok" : "FAILED");
  return ok;
}

// One 4 MiB request from node 0 to the server, node 7, of XGFT(3; 2,2,2; 1,2,2): six links, up
// to the top and down the other pod; then, alone again, a second one.
bool one_transfer_over_a_route() {
  Case c{{2, 2, 2}, {1, 2, 2}, {7}, {0}, {}, {}, job(4 << 20, 2, true)};
  c.mpi.enabled = false;
  const int hops = static_cast<int>(Fabric(c.down, c.up).route(0, 7).size());
  const auto latencies = simulate(c, NetworkModel::Packet).io;
  bool ok = hops == 6 && latencies.size() == 2;
  for (const double t : latencies)
    ok = report("4 MiB over 6 links", t, one_transfer(4 << 20, hops), 2 * hops * kTick) && ok;
  return ok;
}

// Two 4 MiB requests from nodes 0 and 1 to node 3 of one switch: the switch's port to node 3 is
// the bottleneck and its FIFO interleaves them segment by segment, so the later one ends one
// flow's bytes after a transfer alone would, and the earlier one a segment before.
bool two_flows_share_a_bottleneck_queue() {
  Case c{{4}, {1}, {3}, {0, 1}, {}, {}, job(4 << 20, 1, true)};
  c.mpi.enabled = false;
  auto latencies = simulate(c, NetworkModel::Packet).io;
  std::sort(latencies.begin(), latencies.end());
  const double segment = wire(kPacket + kHeaders);
  const double later = one_transfer(4 << 20, 2) + 1024 * segment;
  return latencies.size() == 2 &&
         report("the later of two sharing a port", latencies[1], later, 4 * kTick) &&
         report("the earlier of two sharing a port", latencies[0], later - segment, 4 * kTick);
}

// MPI node 2 (leaf 0) exchanges 4 KiB messages every 20 us with node 6 (leaf 1) of
// XGFT(2; 4,2; 1,1), one top switch; I/O clients 0 and 1 (leaf 0) write to server 5 (leaf 1)
// without pause. Both I/O flows climb through leaf 0's one up-port at twice its rate: their
// windows queue there, 2 x 128 KiB, and a message from node 2 waits behind them in the FIFO.
Case mpi_beside_io() {
  Case c{{4, 2}, {1, 1}, {5}, {0, 1}, {2, 6}, job(4096, 60, false, 20e-6), job(4 << 20, 1, false)};
  c.mpi.warmup = 10;
  c.io.measured = false;
  return c;
}

Case mpi_alone() {
  Case c = mpi_beside_io();
  c.io.enabled = false;
  return c;
}

// Every message crosses that queue twice: one from node 2 with its SYN and its data, one to node
// 2 with node 2's SYN-ACK and acknowledgement (each transfer opens a TCP connection). Each
// crossing waits for most of the queue, so the mean grows by more than one drain time.
bool mpi_message_behind_a_full_io_queue_waits() {
  const double alone = mean(simulate(mpi_alone(), NetworkModel::Packet).mpi);
  const double beside = mean(simulate(mpi_beside_io(), NetworkModel::Packet).mpi);
  const double drain = 2 * kWindow / kLinkBw;
  std::printf("MPI 4 KiB mean: alone %.3g s, behind I/O %.3g s, queue drain %.3g s\n", alone,
              beside, drain);
  const bool ok = beside >= alone + drain && report("alone", alone, one_transfer(4096, 4), 1e-8);
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok;
}

// The same case in both models. Fluid: max-min sharing gives the MPI message a third of leaf 0's
// up-link at once, so it takes about three times its serialization. Packet: it waits behind
// the I/O windows queued in that port's FIFO, tens of microseconds.
bool packet_slows_mpi_more_than_fluid() {
  std::map<NetworkModel, double> slowdown;
  for (const auto model : {NetworkModel::Fluid, NetworkModel::Packet})
    slowdown[model] =
        mean(simulate(mpi_beside_io(), model).mpi) / mean(simulate(mpi_alone(), model).mpi);
  std::printf("MPI slowdown beside I/O: fluid %.3gx, packet %.3gx\n", slowdown[NetworkModel::Fluid],
              slowdown[NetworkModel::Packet]);
  const bool ok = slowdown[NetworkModel::Fluid] < 2.5 &&
                  slowdown[NetworkModel::Packet] > 2 * slowdown[NetworkModel::Fluid];
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  g_program = argv[0];
  const std::map<std::string, std::function<bool()>> cases = {
      {"one-transfer", one_transfer_over_a_route},
      {"shared-bottleneck", two_flows_share_a_bottleneck_queue},
      {"mpi-behind-io", mpi_message_behind_a_full_io_queue_waits},
      {"packet-vs-fluid", packet_slows_mpi_more_than_fluid}};
  const auto found = argc == 2 ? cases.find(argv[1]) : cases.end();
  if (found == cases.end()) {
    std::cerr << "usage: netsim_packet_checks one-transfer|shared-bottleneck|mpi-behind-io|"
                 "packet-vs-fluid\n";
    return 2;
  }
  try {
    return found->second() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
