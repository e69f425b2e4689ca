#include "netsim/packet_network.hpp"

#include "netsim/ns3_ports.hpp"

namespace sg4 = simgrid::s4u;

namespace harmonia::netsim {

namespace {
// Hosts only wait and send; any speed will do.
constexpr double kHostSpeed = 1e9;
}  // namespace

void select_packet_model(const PacketParams& params) {
  sg4::Engine::get_instance()->set_config("network/model:ns-3");
  ns3_ports::set_link_defaults(params.packet_size + kPacketHeaderRoom);
}

std::vector<sg4::Host*> build_packet_fabric(const Fabric& fabric, double link_bw,
                                            double hop_latency, const PacketParams& params) {
  auto* zone = sg4::create_dijkstra_zone("fabric", false);
  ns3_ports::set_transport_defaults(params.packet_size, params.window);

  // Elements: the hosts by position, then the switches level by level.
  const int levels = fabric.levels();
  std::vector<long> first_element{0};
  for (int level = 0; level <= levels; ++level)
    first_element.push_back(first_element.back() + fabric.count(level));
  auto element = [&](int level, long position) {
    return first_element[static_cast<size_t>(level)] + position;
  };
  std::vector<sg4::Host*> hosts;
  std::vector<simgrid::kernel::routing::NetPoint*> netpoints;
  for (long n = 0; n < fabric.nodes(); ++n) {
    hosts.push_back(zone->create_host("node-" + std::to_string(n), kHostSpeed));
    netpoints.push_back(hosts.back()->get_netpoint());
  }
  for (int level = 1; level <= levels; ++level)
    for (long s = 0; s < fabric.count(level); ++s)
      netpoints.push_back(zone->create_router(Fabric::switch_name({level, s})));

  // A one-link route is the only route SimGrid's ns-3 binding turns into an ns-3 link: one
  // point-to-point link per cable (full duplex: a queue each way), made level by level so that
  // the lower end of each is known when it is made.
  ns3_ports::Ports ports(hosts, first_element.back(), fabric.cable_count());
  for (long index = 0; index < fabric.cable_count(); ++index) {
    const Cable c = fabric.cable(index);
    const long lower = element(c.level, c.lower);
    const long upper = element(c.level + 1, fabric.parent(c.level, c.lower, c.port));
    auto* link = zone->create_link("cable-" + std::to_string(index), link_bw);
    link->set_latency(hop_latency);
    link->seal();
    zone->add_route(netpoints[static_cast<size_t>(lower)], netpoints[static_cast<size_t>(upper)],
                    nullptr, nullptr, {sg4::LinkInRoute(link)}, true);
    ports.add_cable(index, lower, upper);
  }
  zone->seal();
  if (params.credits)
    ports.make_credit_fifo(params.port_buffer, hop_latency);
  else
    ports.make_fifo();

  // Forwarding: the fabric's D-mod-k decision at every element for every destination.
  std::vector<std::vector<long>> link_by_dst;
  for (int level = 0; level <= levels; ++level)
    for (long position = 0; position < fabric.count(level); ++position) {
      auto& table = link_by_dst.emplace_back();
      // A compute node has one link, up, whatever the destination.
      const long destinations = level == 0 ? 1 : fabric.nodes();
      for (long dst = 0; dst < destinations; ++dst)
        table.push_back(Fabric::link_index(fabric.next_hop(level, position, dst)));
    }
  ports.install_forwarding(link_by_dst);
  return hosts;
}

long packet_drops() { return ns3_ports::packet_drops(); }

}  // namespace harmonia::netsim
