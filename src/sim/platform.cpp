#include "sim/platform.hpp"

namespace sg4 = simgrid::s4u;

namespace harmonia::sim {

namespace {
// Hosts only wait (compute is modelled as time, not flops); any speed will do.
constexpr double kHostSpeed = 1e9;
}  // namespace

sg4::Disk* create_device_disk(sg4::Host* host, const std::string& name,
                              const core::DeviceModel& device) {
  auto* disk =
      host->create_disk(name, device.peak_bw(core::Op::Read), device.peak_bw(core::Op::Write));
  // Reads and writes share the device: the combined constraint gets the curve, so a drain (read)
  // and a phase (write) on one buffer count as two concurrent streams.
  auto curve = [device](double capacity, int n) { return capacity * device.efficiency(n); };
  disk->set_sharing_policy(sg4::Disk::Operation::READWRITE, sg4::Disk::SharingPolicy::NONLINEAR,
                           curve);
  disk->set_sharing_policy(sg4::Disk::Operation::READ, sg4::Disk::SharingPolicy::NONLINEAR, curve);
  disk->set_sharing_policy(sg4::Disk::Operation::WRITE, sg4::Disk::SharingPolicy::NONLINEAR, curve);
  disk->seal();
  return disk;
}

PlatformHosts build_platform(const Scenario& s) {
  const auto& p = s.platform;
  const size_t needed =
      static_cast<size_t>(p.compute_nodes + s.scheduler.buffer_count + s.pfs_servers);
  // A switch is a one-level fat-tree; a fat-tree's leaf count was checked against `needed` when
  // the scenario was parsed.
  const FatTree tree = p.fat_tree ? p.tree : FatTree{1, {static_cast<unsigned>(needed)}, {1}, {1}};

  PlatformHosts hosts;
  auto name_of = [&](unsigned long id) -> std::string {
    const auto c = static_cast<unsigned long>(p.compute_nodes);
    const auto b = static_cast<unsigned long>(s.scheduler.buffer_count);
    const auto f = static_cast<unsigned long>(s.pfs_servers);
    if (id < c) return "compute-" + std::to_string(id);
    if (id < c + b) return "buffer-" + std::to_string(id - c);
    if (id < c + b + f) return "pfs-" + std::to_string(id - c - b);
    return "spare-" + std::to_string(id);
  };
  auto netpoint = [&](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    auto* host = zone->create_host(name_of(id), kHostSpeed);
    return std::make_pair(host->get_netpoint(), nullptr);
  };
  auto* zone = sg4::create_fatTree_zone(
      "fabric", nullptr, sg4::FatTreeParams(tree.levels, tree.down, tree.up, tree.link_count),
      sg4::ClusterCallbacks(netpoint), p.link_bw, p.link_latency,
      sg4::Link::SharingPolicy::SPLITDUPLEX);
  zone->seal();

  auto* engine = sg4::Engine::get_instance();
  for (int i = 0; i < p.compute_nodes; ++i)
    hosts.compute.push_back(engine->host_by_name("compute-" + std::to_string(i)));
  for (int i = 0; i < s.scheduler.buffer_count; ++i) {
    auto* h = engine->host_by_name("buffer-" + std::to_string(i));
    hosts.buffers.push_back(h);
    hosts.buffer_disks.push_back(create_device_disk(h, "bb-disk", s.scheduler.buffer_device));
  }
  for (int i = 0; i < s.pfs_servers; ++i) {
    auto* h = engine->host_by_name("pfs-" + std::to_string(i));
    hosts.pfs.push_back(h);
    hosts.pfs_disks.push_back(create_device_disk(h, "pfs-disk", s.pfs_device));
  }
  return hosts;
}

}  // namespace harmonia::sim
