#pragma once
/// @file The packet-level network: the same fat-tree on SimGrid's ns-3 model, with every switch
/// forwarding by our D-mod-k routes, FIFO port queues and credit-based link-level flow control
/// (docs/network-interference.md, "Packet-level mode"). Needs the engine; once per process, instead
/// of build_fabric.

#include <simgrid/s4u.hpp>
#include <vector>

#include "netsim/config.hpp"
#include "netsim/fabric.hpp"

namespace harmonia::netsim {

/// Switches SimGrid to its ns-3 model and sets the ns-3 defaults the platform needs (packet
/// size, queue capacity). Call before build_packet_fabric, before any zone exists.
void select_packet_model(const PacketParams& params);

/// Builds the fat-tree as one-link routes between neighbouring elements (the only routes
/// SimGrid's ns-3 binding turns into ns-3 links), a point-to-point link of `link_bw` and
/// `hop_latency` per cable, installs the D-mod-k forwarding on every node and FIFO queues on
/// every port (gated by credits, a credit taking `hop_latency` to come back, unless
/// `params.credits` is off), and returns the hosts by position, named "node-<position>".
std::vector<simgrid::s4u::Host*> build_packet_fabric(const Fabric& fabric, double link_bw,
                                                     double hop_latency,
                                                     const PacketParams& params);

/// Packets dropped by any port queue so far (the queues are sized never to drop: a non-zero
/// count means the run is not the model the docs describe).
long packet_drops();

}  // namespace harmonia::netsim
