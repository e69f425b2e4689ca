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
#include <utility>
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
// The port buffer of CODES' fat-tree model (vc_size), and one that holds a single packet.
constexpr double kPortBuffer = 65536;
constexpr double kOnePacketBuffer = kPacket + kPacketHeaderRoom;
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
  PacketParams packet{kPacket, kWindow, false, kPortBuffer};
};

Case with_credits(Case c, double port_buffer = kPortBuffer) {
  c.packet.credits = true;
  c.packet.port_buffer = port_buffer;
  return c;
}

/// `c` with credits, or as it is (no flow control).
Case with_flow_control(Case c, bool credits) { return credits ? with_credits(std::move(c)) : c; }

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
    config.packet = c.packet;
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
// to the top and down the other pod; then, alone again, a second one. Credits change nothing
// here: a 64 KiB port buffer holds far more than the packets a link's round trip keeps in
// flight.
bool one_transfer_over_a_route() {
  Case c{{2, 2, 2}, {1, 2, 2}, {7}, {0}, {}, {}, job(4 << 20, 2, true)};
  c.mpi.enabled = false;
  const int hops = static_cast<int>(Fabric(c.down, c.up).route(0, 7).size());
  bool ok = hops == 6;
  for (const Case& run : {c, with_credits(c)}) {
    const auto latencies = simulate(run, NetworkModel::Packet).io;
    ok = ok && latencies.size() == 2;
    for (const double t : latencies)
      ok = report(std::string("4 MiB over 6 links, flow control ") +
                      (run.packet.credits ? "credits" : "none"),
                  t, one_transfer(4 << 20, hops), 2 * hops * kTick) &&
           ok;
  }
  return ok;
}

// The same request with port buffers of one packet: a port sends a packet only once the one
// before it has left the next element and that credit has come back, one transmission and two
// hop latencies after it started; every packet after the first pays those two latencies more.
bool one_packet_buffers_pace_a_transfer_by_the_credit_loop() {
  Case c{{2, 2, 2}, {1, 2, 2}, {7}, {0}, {}, {}, job(4 << 20, 1, true)};
  c.mpi.enabled = false;
  const auto latencies = simulate(with_credits(c, kOnePacketBuffer), NetworkModel::Packet).io;
  const double segments = std::ceil((4 << 20) / kPacket);
  const double expected = one_transfer(4 << 20, 6) + (segments - 1) * 2 * kHop;
  return latencies.size() == 1 &&
         report("4 MiB over 6 links, one-packet buffers", latencies[0], expected, 12 * kTick);
}

// Two 4 MiB requests from nodes 0 and 1 to node 3 of one switch: the switch's port to node 3 is
// the bottleneck and its FIFO interleaves them segment by segment, so the later one ends one
// flow's bytes after a transfer alone would, and the earlier one a segment before. With credits
// the same: each sender is held back to the rate its packets leave the switch, and the port
// still alternates between them.
bool two_flows_share_a_bottleneck_queue() {
  Case c{{4}, {1}, {3}, {0, 1}, {}, {}, job(4 << 20, 1, true)};
  c.mpi.enabled = false;
  const double segment = wire(kPacket + kHeaders);
  const double later = one_transfer(4 << 20, 2) + 1024 * segment;
  bool ok = true;
  for (const Case& run : {c, with_credits(c)}) {
    auto latencies = simulate(run, NetworkModel::Packet).io;
    std::sort(latencies.begin(), latencies.end());
    const std::string flow = run.packet.credits ? " (credits)" : " (no flow control)";
    ok = latencies.size() == 2 &&
         report("the later of two sharing a port" + flow, latencies[1], later, 4 * kTick) &&
         report("the earlier of two sharing a port" + flow, latencies[0], later - segment,
                4 * kTick) &&
         ok;
  }
  return ok;
}

// MPI node 2 (leaf 0) exchanges 4 KiB messages every 20 us with node 6 (leaf 1) of
// XGFT(2; 4,2; 1,1), one top switch; I/O clients 0 and 1 (leaf 0) write to server 5 (leaf 1)
// without pause. Both I/O flows climb through leaf 0's one up-port at twice its rate and queue
// there, and a message from node 2 waits behind them in the FIFO. Without flow control their
// windows queue there, 2 x 128 KiB; with credits what the port's buffers for the two clients'
// links hold, 2 x 64 KiB (the rest of each window waits in its client).
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
  bool ok = true;
  for (const bool credits : {false, true}) {
    const double alone =
        mean(simulate(with_flow_control(mpi_alone(), credits), NetworkModel::Packet).mpi);
    const double beside =
        mean(simulate(with_flow_control(mpi_beside_io(), credits), NetworkModel::Packet).mpi);
    const double drain = 2 * (credits ? kPortBuffer : kWindow) / kLinkBw;
    std::printf("%s: MPI 4 KiB mean alone %.3g s, behind I/O %.3g s, queue drain %.3g s\n",
                credits ? "credits" : "no flow control", alone, beside, drain);
    ok = beside >= alone + drain && report("alone", alone, one_transfer(4096, 4), 1e-8) && ok;
  }
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok;
}

// The same case in both models. Fluid: max-min sharing gives the MPI message a third of leaf 0's
// up-link at once, so it takes about three times its serialization. Packet (with credits, as
// it runs by default): it waits behind the I/O packets queued in that port's FIFO, tens of
// microseconds.
bool packet_slows_mpi_more_than_fluid() {
  std::map<NetworkModel, double> slowdown;
  for (const auto model : {NetworkModel::Fluid, NetworkModel::Packet})
    slowdown[model] = mean(simulate(with_credits(mpi_beside_io()), model).mpi) /
                      mean(simulate(with_credits(mpi_alone()), model).mpi);
  std::printf("MPI slowdown beside I/O: fluid %.3gx, packet %.3gx\n", slowdown[NetworkModel::Fluid],
              slowdown[NetworkModel::Packet]);
  const bool ok = slowdown[NetworkModel::Fluid] < 2.5 &&
                  slowdown[NetworkModel::Packet] > 2 * slowdown[NetworkModel::Fluid];
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok;
}

// XGFT(2; 2,4; 1,2): four leaves of two nodes, two top switches. I/O clients 0 (leaf 0) and 2
// (leaf 1) write without pause to server 4 (leaf 2); under D-mod-k both requests climb to the
// same top switch and share its one down-link to leaf 2, their bottleneck. MPI node 1 (leaf 0)
// exchanges 4 KiB messages with node 6 (leaf 3): its messages to node 6 leave leaf 0 on the
// up-link client 0 uses, at half that link's rate, but share no port where I/O queues.
Case mpi_upstream_of_io_congestion() {
  Case c{{2, 4}, {1, 2}, {4}, {0, 2}, {1, 6}, job(4096, 60, false, 20e-6), job(4 << 20, 1, false)};
  c.mpi.warmup = 10;
  c.io.measured = false;
  return c;
}

/// Whether the routes are the ones the case below describes.
bool congestion_tree_routes_hold(const Case& c) {
  const Fabric fabric(c.down, c.up);
  const auto io0 = fabric.route(0, 4), io2 = fabric.route(2, 4), mpi = fabric.route(1, 6);
  auto same = [](const Hop& a, const Hop& b) {
    return a.cable == b.cable && a.direction == b.direction;
  };
  const bool bottleneck_shared = same(io0[2], io2[2]);  // the top switch's down-link to leaf 2
  const bool uplink_shared = same(io0[1], mpi[1]);      // leaf 0's up-link
  bool meets_bottleneck = false;
  for (const Hop& h : mpi) meets_bottleneck = meets_bottleneck || same(h, io0[2]);
  return bottleneck_shared && uplink_shared && !meets_bottleneck;
}

// With lossless FIFO ports the I/O windows wait at their bottleneck, which MPI never crosses,
// and leaf 0's up-link carries client 0's packets at half its rate without a queue: MPI is
// barely slowed. With credits the bottleneck's buffers fill, the top switch stops taking
// packets from leaf 0, and leaf 0's up-port queues client 0's packets: MPI's messages to node 6
// wait behind them although their own way down is free (head-of-line blocking upstream of the
// congestion, the paper's mechanism).
bool credits_spread_congestion_upstream() {
  const Case beside = mpi_upstream_of_io_congestion();
  Case alone = beside;
  alone.io.enabled = false;
  if (!congestion_tree_routes_hold(beside)) {
    std::printf("the routes are not the case's: FAILED\n");
    return false;
  }
  std::map<bool, double> slowdown;
  for (const bool credits : {false, true}) {
    slowdown[credits] =
        mean(simulate(with_flow_control(beside, credits), NetworkModel::Packet).mpi) /
        mean(simulate(with_flow_control(alone, credits), NetworkModel::Packet).mpi);
  }
  std::printf("MPI slowdown upstream of I/O congestion: no flow control %.3gx, credits %.3gx\n",
              slowdown[false], slowdown[true]);
  const bool ok = slowdown[false] < 1.5 && slowdown[true] > 2 * slowdown[false];
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  g_program = argv[0];
  const std::map<std::string, std::function<bool()>> cases = {
      {"one-transfer", one_transfer_over_a_route},
      {"one-packet-buffers", one_packet_buffers_pace_a_transfer_by_the_credit_loop},
      {"congestion-tree", credits_spread_congestion_upstream},
      {"shared-bottleneck", two_flows_share_a_bottleneck_queue},
      {"mpi-behind-io", mpi_message_behind_a_full_io_queue_waits},
      {"packet-vs-fluid", packet_slows_mpi_more_than_fluid}};
  const auto found = argc == 2 ? cases.find(argv[1]) : cases.end();
  if (found == cases.end()) {
    std::cerr << "usage: netsim_packet_checks one-transfer|one-packet-buffers|congestion-tree|"
                 "shared-bottleneck|mpi-behind-io|packet-vs-fluid\n";
    return 2;
  }
  try {
    return found->second() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
