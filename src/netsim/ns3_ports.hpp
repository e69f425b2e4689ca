#pragma once
/// @file The ns-3 side of the packet model, behind plain types: ns-3 3.37's headers do not
/// compile as C++20, so ns3_ports.cpp alone is built as C++17 and nothing else includes them.

#include <cstdint>
#include <memory>
#include <simgrid/s4u.hpp>
#include <vector>

namespace harmonia::netsim::ns3_ports {

/// Before the first zone exists: links carry IP packets of up to `mtu` bytes (a segment and
/// its headers, never fragmented), and port queues are sized never to fill.
void set_link_defaults(double mtu);
/// After the first zone (SimGrid's ns-3 model sets its own TCP defaults when it is set up): the
/// transport behaves like an InfiniBand reliable connection, segments of `packet_size`, the
/// whole `window` sent at once (no slow start).
void set_transport_defaults(double packet_size, double window);

/// The ns-3 devices of the fabric's cables, and the forwarding and queues installed on them.
/// Elements are numbered: the hosts first, in the order given, then the switches.
class Ports {
 public:
  Ports(const std::vector<simgrid::s4u::Host*>& hosts, long elements, long cables);
  ~Ports();
  Ports(const Ports&) = delete;
  Ports& operator=(const Ports&) = delete;

  /// Records the ns-3 link SimGrid has just made for cable `index` between element `lower`
  /// (known already: a host, or a switch reached by an earlier cable) and element `upper`.
  void add_cable(long index, long lower, long upper);
  /// Replaces every port's queue discipline (ns-3 installs a fair-queueing FqCoDel by default)
  /// by nothing: what remains is the device's drop-tail FIFO.
  void make_fifo();
  /// Replaces every port's queue discipline by a FIFO gated by credits: each link's far end
  /// has a buffer of `port_buffer` bytes, a port sends its head packet only while that buffer
  /// has room for it, and the room comes back `credit_delay` after the packet leaves the far
  /// end (a switch sends it on, or a host receives it). A packet waiting for credits holds up
  /// every packet behind it in the port, whatever their next hop.
  void make_credit_fifo(double port_buffer, double credit_delay);
  /// Installs on every element a forwarding by destination compute node: `link_by_dst[e][d]`
  /// is the link element e sends a packet for node d on, as 2 * cable + (1 if down, 0 if up).
  /// A host's list may hold one entry, used for every destination.
  void install_forwarding(const std::vector<std::vector<long>>& link_by_dst);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Packets dropped by any port queue so far.
long packet_drops();

}  // namespace harmonia::netsim::ns3_ports
