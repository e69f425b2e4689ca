#include "simkit/platform.hpp"

#include <numeric>

namespace sg4 = simgrid::s4u;

namespace harmonia::simkit {

namespace {
// Hosts only wait and send (compute is modelled as time, not flops); any speed will do.
constexpr double kHostSpeed = 1e9;
}  // namespace

std::vector<std::vector<sg4::Host*>> build_network(const Network& network,
                                                   const std::vector<HostGroup>& groups) {
  unsigned long hosts = 0;
  for (const auto& g : groups) hosts += static_cast<unsigned long>(g.count);

  auto name_of = [&](unsigned long leaf) -> std::string {
    unsigned long first = 0;
    for (const auto& g : groups) {
      const auto count = static_cast<unsigned long>(g.count);
      if (leaf < first + count) return g.prefix + "-" + std::to_string(leaf - first);
      first += count;
    }
    return "spare-" + std::to_string(leaf);
  };
  sg4::NetZone* zone = nullptr;
  if (network.tree) {
    auto netpoint = [&](sg4::NetZone* z, const std::vector<unsigned long>&, unsigned long leaf) {
      auto* host = z->create_host(name_of(leaf), kHostSpeed);
      return std::make_pair(host->get_netpoint(), nullptr);
    };
    const FatTree& tree = *network.tree;
    zone = sg4::create_fatTree_zone(
        "fabric", nullptr, sg4::FatTreeParams(tree.levels, tree.down, tree.up, tree.link_count),
        sg4::ClusterCallbacks(netpoint), network.link_bw, network.link_latency,
        sg4::Link::SharingPolicy::SPLITDUPLEX);
  } else {
    // One switch: each host's private full-duplex link, up to the switch and down from it. The
    // one-level fat-tree has the same links, but SimGrid 3.32 finds a route down it by scanning
    // every port of the switch, so a transfer would cost in proportion to the hosts; a star
    // zone looks the two links up.
    zone = sg4::create_star_zone("fabric");
    for (unsigned long leaf = 0; leaf < hosts; ++leaf) {
      auto* host = zone->create_host(name_of(leaf), kHostSpeed);
      auto* link = zone->create_split_duplex_link(host->get_name() + "-port", network.link_bw)
                       ->set_latency(network.link_latency)
                       ->seal();
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {{link, sg4::LinkInRoute::Direction::UP}}, true);
    }
  }
  zone->seal();

  auto* engine = sg4::Engine::get_instance();
  std::vector<std::vector<sg4::Host*>> out;
  for (const auto& g : groups) {
    auto& group = out.emplace_back();
    for (long i = 0; i < g.count; ++i)
      group.push_back(engine->host_by_name(g.prefix + "-" + std::to_string(i)));
  }
  return out;
}

sg4::Disk* create_disk(sg4::Host* host, const std::string& name, const core::DeviceModel& device,
                       const RequestEfficiency& request_efficiency) {
  auto* disk =
      host->create_disk(name, device.peak_bw(core::Op::Read), device.peak_bw(core::Op::Write));
  // Reads and writes share the device: the combined constraint gets the curve too, so a drain
  // (read) and a phase (write) on one buffer count as two concurrent streams.
  auto curve = [device](double capacity, int n) { return capacity * device.efficiency(n); };
  for (auto op :
       {sg4::Disk::Operation::READWRITE, sg4::Disk::Operation::READ, sg4::Disk::Operation::WRITE})
    disk->set_sharing_policy(op, sg4::Disk::SharingPolicy::NONLINEAR, curve);
  if (request_efficiency)
    disk->set_factor_cb([request_efficiency](sg_size_t size, sg4::Io::OpType) {
      return request_efficiency(static_cast<double>(size));
    });
  disk->seal();
  return disk;
}

}  // namespace harmonia::simkit
