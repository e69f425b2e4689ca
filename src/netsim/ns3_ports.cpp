// Built as C++17 (see ns3_ports.hpp): includes ns-3.
#include "netsim/ns3_ports.hpp"

#include <ns3/core-module.h>
#include <ns3/internet-module.h>
#include <ns3/network-module.h>
#include <ns3/point-to-point-module.h>
#include <ns3/traffic-control-module.h>

#include <cmath>
#include <simgrid/plugins/ns3.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace harmonia::netsim::ns3_ports {

namespace {

// Port queues hold this many packets: far more than the windows of all transfers together, so
// they never drop (packet_drops() says if they did).
constexpr uint32_t kQueuePackets = 1U << 24;
constexpr uint32_t kSendBuffer = 1U << 26;
// Above ns-3's own protocols (static 0, global -10): every lookup is ours.
constexpr int16_t kRoutingPriority = 100;

long g_drops = 0;

// By value: the type of the queue's "Drop" trace source.
void count_drop(
    ns3::Ptr<const ns3::Packet> /*packet*/) {  // NOLINT(performance-unnecessary-value-param)
  ++g_drops;
}

/// Destination compute node of every host address (shared by all nodes' forwarding).
using NodeOfAddress = std::unordered_map<uint32_t, uint32_t>;

/// Forwards a packet for compute node d through interface_by_node[d] (a single entry: the same
/// interface for every destination).
class TableForwarding : public ns3::Ipv4RoutingProtocol {
 public:
  TableForwarding(std::shared_ptr<const NodeOfAddress> node_of_address,
                  std::vector<uint32_t> interface_by_node, std::vector<ns3::Ipv4Address> peer)
      : node_of_address_(std::move(node_of_address)),
        interface_by_node_(std::move(interface_by_node)),
        peer_(std::move(peer)) {}

  ns3::Ptr<ns3::Ipv4Route> RouteOutput(ns3::Ptr<ns3::Packet> /*p*/, const ns3::Ipv4Header& header,
                                       ns3::Ptr<ns3::NetDevice> /*oif*/,
                                       ns3::Socket::SocketErrno& sockerr) override {
    auto route = route_to(header.GetDestination());
    sockerr = route ? ns3::Socket::ERROR_NOTERROR : ns3::Socket::ERROR_NOROUTETOHOST;
    return route;
  }

  bool RouteInput(ns3::Ptr<const ns3::Packet> p, const ns3::Ipv4Header& header,
                  ns3::Ptr<const ns3::NetDevice> /*idev*/, UnicastForwardCallback ucb,
                  MulticastForwardCallback /*mcb*/, LocalDeliverCallback /*lcb*/,
                  ErrorCallback /*ecb*/) override {
    // Local delivery is decided by Ipv4ListRouting before it asks us.
    auto route = route_to(header.GetDestination());
    if (!route) return false;
    ucb(route, p, header);
    return true;
  }

  void NotifyInterfaceUp(uint32_t /*interface*/) override {}
  void NotifyInterfaceDown(uint32_t /*interface*/) override {}
  void NotifyAddAddress(uint32_t /*interface*/, ns3::Ipv4InterfaceAddress /*address*/) override {}
  void NotifyRemoveAddress(uint32_t /*interface*/, ns3::Ipv4InterfaceAddress /*address*/) override {
  }
  void SetIpv4(ns3::Ptr<ns3::Ipv4> ipv4) override { ipv4_ = ipv4; }
  void PrintRoutingTable(ns3::Ptr<ns3::OutputStreamWrapper> stream,
                         ns3::Time::Unit /*unit*/) const override {
    *stream->GetStream() << "forwarding by destination node, " << interface_by_node_.size()
                         << " entries\n";
  }

 private:
  ns3::Ptr<ns3::Ipv4Route> route_to(ns3::Ipv4Address destination) const {
    const auto found = node_of_address_->find(destination.Get());
    if (found == node_of_address_->end()) return nullptr;
    const uint32_t interface = interface_by_node_.size() == 1 ? interface_by_node_.front()
                                                              : interface_by_node_[found->second];
    auto route = ns3::Create<ns3::Ipv4Route>();
    route->SetDestination(destination);
    route->SetSource(ipv4_->GetAddress(interface, 0).GetLocal());
    route->SetGateway(peer_[interface]);
    route->SetOutputDevice(ipv4_->GetNetDevice(interface));
    return route;
  }

  std::shared_ptr<const NodeOfAddress> node_of_address_;
  std::vector<uint32_t> interface_by_node_;
  std::vector<ns3::Ipv4Address> peer_;  // by interface: the address at the other end
  ns3::Ptr<ns3::Ipv4> ipv4_;
};

/// The credit a packet took on the link it last crossed: carried with the packet until it leaves
/// the element at that link's far end, which then gives the credit back.
class CreditTag : public ns3::Tag {
 public:
  CreditTag() = default;
  CreditTag(uint32_t link, uint32_t bytes) : link_(link), bytes_(bytes) {}
  static ns3::TypeId GetTypeId() {
    static ns3::TypeId tid = ns3::TypeId("harmonia::CreditTag")
                                 .SetParent<ns3::Tag>()
                                 .SetGroupName("Harmonia")
                                 .AddConstructor<CreditTag>();
    return tid;
  }
  ns3::TypeId GetInstanceTypeId() const override { return GetTypeId(); }
  uint32_t GetSerializedSize() const override { return 2 * sizeof(uint32_t); }
  void Serialize(ns3::TagBuffer buffer) const override {
    buffer.WriteU32(link_);
    buffer.WriteU32(bytes_);
  }
  void Deserialize(ns3::TagBuffer buffer) override {
    link_ = buffer.ReadU32();
    bytes_ = buffer.ReadU32();
  }
  void Print(std::ostream& os) const override { os << "link=" << link_ << " bytes=" << bytes_; }
  uint32_t link() const { return link_; }
  uint32_t bytes() const { return bytes_; }

 private:
  uint32_t link_ = 0;
  uint32_t bytes_ = 0;
};

class CreditQueueDisc;

/// The free room of every link's receiving buffer, as its sending port knows it.
class Credits {
 public:
  Credits(size_t links, double port_buffer, ns3::Time delay)
      : free_(links, static_cast<int64_t>(port_buffer)), gates_(links), delay_(std::move(delay)) {}

  void set_gate(size_t link, CreditQueueDisc* gate) { gates_[link] = gate; }
  bool can_send(size_t link, uint32_t bytes) const {
    return free_[link] >= static_cast<int64_t>(bytes);
  }
  /// `packet` leaves on `link`: it takes its size of the far end's room.
  void take(const ns3::Ptr<ns3::Packet>& packet, size_t link, uint32_t bytes) {
    free_[link] -= bytes;
    packet->AddPacketTag(CreditTag(static_cast<uint32_t>(link), bytes));
  }
  /// `packet` leaves the element it reached: the link it came in on gets its room back, one
  /// credit delay later. A packet a host sends has no credit to give back.
  void give_back(const ns3::Ptr<ns3::Packet>& packet) {
    CreditTag tag;
    if (packet->RemovePacketTag(tag)) schedule_return(tag);
  }
  /// A host received `packet`: its room is free at once (a host consumes what it receives).
  void received(
      ns3::Ptr<const ns3::Packet> packet) {  // NOLINT(performance-unnecessary-value-param)
    CreditTag tag;
    if (packet->PeekPacketTag(tag)) schedule_return(tag);
  }

 private:
  void schedule_return(const CreditTag& tag) {
    ns3::Simulator::Schedule(delay_, &Credits::credit, this, tag.link(), tag.bytes());
  }
  void credit(uint32_t link, uint32_t bytes);

  std::vector<int64_t> free_;
  std::vector<CreditQueueDisc*> gates_;
  ns3::Time delay_;
};

/// A port's FIFO that sends its head packet only when the link's far end has room for it.
class CreditQueueDisc : public ns3::QueueDisc {
 public:
  static ns3::TypeId GetTypeId() {
    static ns3::TypeId tid = ns3::TypeId("harmonia::CreditQueueDisc")
                                 .SetParent<ns3::QueueDisc>()
                                 .SetGroupName("Harmonia")
                                 .AddConstructor<CreditQueueDisc>();
    return tid;
  }
  CreditQueueDisc() : ns3::QueueDisc(ns3::QueueDiscSizePolicy::SINGLE_INTERNAL_QUEUE) {}
  void attach(std::shared_ptr<Credits> credits, size_t link) {
    credits_ = std::move(credits);
    link_ = link;
  }

 private:
  bool DoEnqueue(ns3::Ptr<ns3::QueueDiscItem> item) override {
    return GetInternalQueue(0)->Enqueue(item);
  }
  ns3::Ptr<ns3::QueueDiscItem> DoDequeue() override {
    const auto head = GetInternalQueue(0)->Peek();
    if (!head || !credits_->can_send(link_, head->GetSize())) return nullptr;
    auto item = GetInternalQueue(0)->Dequeue();
    credits_->give_back(item->GetPacket());
    credits_->take(item->GetPacket(), link_, item->GetSize());
    return item;
  }
  ns3::Ptr<const ns3::QueueDiscItem> DoPeek() override { return GetInternalQueue(0)->Peek(); }
  bool CheckConfig() override {
    if (GetNInternalQueues() == 0)
      AddInternalQueue(ns3::CreateObjectWithAttributes<ns3::DropTailQueue<ns3::QueueDiscItem>>(
          "MaxSize", ns3::QueueSizeValue(ns3::QueueSize(ns3::PACKETS, kQueuePackets))));
    return GetNInternalQueues() == 1;
  }
  void InitializeParams() override {}

  std::shared_ptr<Credits> credits_;  // shared by every port's gate, alive as long as they are
  size_t link_ = 0;
};

void Credits::credit(uint32_t link, uint32_t bytes) {
  free_[link] += bytes;
  gates_[link]->Run();
}

// By value: the type of a queue disc's "Drop" trace source.
void count_disc_drop(
    ns3::Ptr<const ns3::QueueDiscItem> /*item*/) {  // NOLINT(performance-unnecessary-value-param)
  ++g_drops;
}

/// Removes the queue discipline ns-3 installed on `device` (FqCoDel) and counts the drops of its
/// device queue, which it returns.
ns3::Ptr<ns3::Queue<ns3::Packet>> strip_port(const ns3::Ptr<ns3::NetDevice>& device) {
  auto tc = device->GetNode()->GetObject<ns3::TrafficControlLayer>();
  if (tc->GetRootQueueDiscOnDevice(device)) tc->DeleteRootQueueDiscOnDevice(device);
  auto queue = ns3::DynamicCast<ns3::PointToPointNetDevice>(device)->GetQueue();
  queue->TraceConnectWithoutContext("Drop", ns3::MakeCallback(&count_drop));
  return queue;
}

uint32_t interface_of(const ns3::Ptr<ns3::NetDevice>& device) {
  return static_cast<uint32_t>(
      device->GetNode()->GetObject<ns3::Ipv4>()->GetInterfaceForDevice(device));
}

ns3::Ipv4Address address_of(const ns3::Ptr<ns3::NetDevice>& device) {
  return device->GetNode()->GetObject<ns3::Ipv4>()->GetAddress(interface_of(device), 0).GetLocal();
}

}  // namespace

void set_link_defaults(double mtu) {
  ns3::Config::SetDefault("ns3::PointToPointNetDevice::Mtu",
                          ns3::UintegerValue(static_cast<uint16_t>(mtu)));
  ns3::Config::SetDefault("ns3::DropTailQueue<Packet>::MaxSize",
                          ns3::QueueSizeValue(ns3::QueueSize(ns3::PACKETS, kQueuePackets)));
}

void set_transport_defaults(double packet_size, double window) {
  ns3::Config::SetDefault("ns3::TcpSocket::SegmentSize",
                          ns3::UintegerValue(static_cast<uint32_t>(packet_size)));
  // The sender's buffer is far larger than the window, so that a full segment is always waiting
  // when an acknowledgement opens the window (SimGrid writes into it 1,040 bytes at a time).
  ns3::Config::SetDefault("ns3::TcpSocket::SndBufSize", ns3::UintegerValue(kSendBuffer));
  ns3::Config::SetDefault("ns3::TcpSocket::RcvBufSize",
                          ns3::UintegerValue(static_cast<uint32_t>(window)));
  ns3::Config::SetDefault(
      "ns3::TcpSocket::InitialCwnd",
      ns3::UintegerValue(static_cast<uint32_t>(std::ceil(window / packet_size))));
}

struct Ports::Impl {
  std::vector<ns3::Ptr<ns3::Node>> nodes;  // by element
  long hosts = 0;
  // By link (2 * cable + direction): the device that sends on it, and the one that receives.
  std::vector<ns3::Ptr<ns3::NetDevice>> sender, receiver;
};

Ports::Ports(const std::vector<simgrid::s4u::Host*>& hosts, long elements, long cables)
    : impl_(std::make_unique<Impl>()) {
  impl_->nodes.resize(static_cast<size_t>(elements));
  impl_->hosts = static_cast<long>(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h)
    impl_->nodes[h] = simgrid::get_ns3node_from_sghost(hosts[h]);
  impl_->sender.resize(static_cast<size_t>(2 * cables));
  impl_->receiver.resize(static_cast<size_t>(2 * cables));
}

Ports::~Ports() = default;

void Ports::add_cable(long index, long lower, long upper) {
  const auto& below = impl_->nodes.at(static_cast<size_t>(lower));
  if (!below) throw std::logic_error("ns-3 platform: a cable from an unreached element");
  auto device = below->GetDevice(below->GetNDevices() - 1);
  auto channel = device->GetChannel();
  auto other = channel->GetDevice(channel->GetDevice(0) == device ? 1 : 0);
  auto& above = impl_->nodes.at(static_cast<size_t>(upper));
  if (!above) above = other->GetNode();
  if (above != other->GetNode())
    throw std::logic_error("ns-3 platform: element " + std::to_string(upper) +
                           " has two ns-3 nodes");
  const auto up = static_cast<size_t>(2 * index);
  impl_->sender[up] = device;
  impl_->receiver[up] = other;
  impl_->sender[up + 1] = other;
  impl_->receiver[up + 1] = device;
}

void Ports::make_fifo() {
  for (const auto& device : impl_->sender) strip_port(device);
}

void Ports::make_credit_fifo(double port_buffer, double credit_delay) {
  auto credits =
      std::make_shared<Credits>(impl_->sender.size(), port_buffer, ns3::Seconds(credit_delay));
  std::unordered_set<uint32_t> host_ids;
  for (long h = 0; h < impl_->hosts; ++h)
    host_ids.insert(impl_->nodes[static_cast<size_t>(h)]->GetId());
  for (size_t link = 0; link < impl_->sender.size(); ++link) {
    const auto& device = impl_->sender[link];
    auto queue = strip_port(device);
    auto gate = ns3::CreateObject<CreditQueueDisc>();
    gate->attach(credits, link);
    gate->TraceConnectWithoutContext("Drop", ns3::MakeCallback(&count_disc_drop));
    device->GetNode()->GetObject<ns3::TrafficControlLayer>()->SetRootQueueDiscOnDevice(device,
                                                                                       gate);
    credits->set_gate(link, ns3::PeekPointer(gate));
    // The device holds one packet besides the one on the wire: the rest wait in the gate.
    queue->SetMaxSize(ns3::QueueSize(ns3::PACKETS, 1));
    // A host consumes what it receives: the room on its down-link comes back at once.
    const auto& receiver = impl_->receiver[link];
    if (host_ids.count(receiver->GetNode()->GetId()) != 0)
      receiver->TraceConnectWithoutContext("MacRx",
                                           ns3::MakeCallback(&Credits::received, credits.get()));
  }
}

void Ports::install_forwarding(const std::vector<std::vector<long>>& link_by_dst) {
  // A host's address is the one on its only device.
  auto node_of_address = std::make_shared<NodeOfAddress>();
  for (long h = 0; h < impl_->hosts; ++h) {
    auto ipv4 = impl_->nodes[static_cast<size_t>(h)]->GetObject<ns3::Ipv4>();
    (*node_of_address)[ipv4->GetAddress(1, 0).GetLocal().Get()] = static_cast<uint32_t>(h);
  }
  // The address at the other end of each interface of each node (the next hop's).
  std::unordered_map<uint32_t, std::vector<ns3::Ipv4Address>> peers;
  for (size_t link = 0; link < impl_->sender.size(); ++link) {
    const auto& mine = impl_->sender[link];
    auto& peer = peers[mine->GetNode()->GetId()];
    peer.resize(mine->GetNode()->GetObject<ns3::Ipv4>()->GetNInterfaces());
    peer[interface_of(mine)] = address_of(impl_->receiver[link]);
  }
  for (size_t e = 0; e < impl_->nodes.size(); ++e) {
    const auto& node = impl_->nodes[e];
    std::vector<uint32_t> table;
    table.reserve(link_by_dst[e].size());
    for (const long link : link_by_dst[e])
      table.push_back(interface_of(impl_->sender[static_cast<size_t>(link)]));
    auto list =
        ns3::DynamicCast<ns3::Ipv4ListRouting>(node->GetObject<ns3::Ipv4>()->GetRoutingProtocol());
    list->AddRoutingProtocol(ns3::Create<TableForwarding>(node_of_address, std::move(table),
                                                          std::move(peers[node->GetId()])),
                             kRoutingPriority);
  }
}

long packet_drops() { return g_drops; }

}  // namespace harmonia::netsim::ns3_ports
