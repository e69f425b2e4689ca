#include "fwdsim/simulation.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <simgrid/s4u.hpp>
#include <unordered_map>

#include "core/requests/registry.hpp"
#include "simkit/platform.hpp"

namespace sg4 = simgrid::s4u;
namespace req = harmonia::core::requests;

namespace harmonia::fwdsim {

namespace {

constexpr std::uint64_t kControlBytes = 512;  ///< a request description or an acknowledgement

/// A message to a forwarding node: a client's request, or a dispatch that completed.
struct NodeMessage {
  bool done = false;
  bool timer = false;               ///< only wakes the node (a window or quantum ended)
  req::Request request;             // !done
  sg4::Mailbox* reply = nullptr;    // !done: where the client waits
  sg4::Host* client = nullptr;      // !done
  std::vector<req::Request> parts;  // done
  double latency = 0;               // done, seconds
};

struct ServerLoad {
  int active = 0;
  double last_change = 0;
  double area = 0;  ///< integral of `active` over time
  double busy = 0;  ///< time with active > 0
  int max_active = 0;
  std::vector<std::pair<double, int>> timeline;

  void change(int delta) {
    const double now = sg4::Engine::get_clock();
    area += active * (now - last_change);
    if (active > 0) busy += now - last_change;
    last_change = now;
    active += delta;
    max_active = std::max(max_active, active);
    timeline.emplace_back(now, active);
  }
};

class Run {
 public:
  explicit Run(const Config& config) : c_(config), striping_{config.stripe, config.servers} {}

  void build() {
    int total_clients = 0;
    for (const auto& app : c_.apps) total_clients += app.clients;
    simkit::Network network;
    network.link_bw = c_.link_bw;
    auto hosts = simkit::build_network(
        network,
        {{"client", total_clients}, {"fwd", c_.forwarding ? c_.nodes : 0}, {"server", c_.servers}});
    client_hosts_ = std::move(hosts[0]);
    node_hosts_ = std::move(hosts[1]);
    server_hosts_ = std::move(hosts[2]);
    const core::DeviceModel device = disk_device(c_.disk, total_clients);
    const DiskConfig disk = c_.disk;
    for (auto* host : server_hosts_)
      disks_.push_back(simkit::create_disk(
          host, "disk", device, [disk](double bytes) { return size_efficiency(disk, bytes); }));
    loads_.resize(static_cast<size_t>(c_.servers));
  }

  void start() {
    int client = 0;
    int total_clients = static_cast<int>(client_hosts_.size());
    node_expected_.assign(static_cast<size_t>(c_.nodes), 0);
    node_servers_.assign(static_cast<size_t>(c_.nodes), {});
    node_max_servers_.assign(static_cast<size_t>(c_.nodes), 0);
    app_end_.assign(c_.apps.size(), 0);
    for (size_t a = 0; a < c_.apps.size(); ++a) {
      const AppConfig& app = c_.apps[a];
      for (int rank = 0; rank < app.clients; ++rank, ++client) {
        // Clients are spread over the forwarding nodes in blocks.
        const int node = client * c_.nodes / total_clients;
        auto requests = app.idle ? std::vector<ClientRequest>{}
                                 : client_requests(app, static_cast<int>(a), rank);
        node_expected_[static_cast<size_t>(node)] += requests.size();
        sg4::Actor::create("client-" + std::to_string(client),
                           client_hosts_[static_cast<size_t>(client)],
                           [this, a, node, client, requests = std::move(requests)] {
                             run_client(a, node, client, requests);
                           });
      }
    }
    if (c_.forwarding)
      for (int n = 0; n < c_.nodes; ++n)
        sg4::Actor::create("fwd-" + std::to_string(n), node_hosts_[static_cast<size_t>(n)],
                           [this, n] { run_node(n); });
  }

  nlohmann::ordered_json results() const {
    nlohmann::ordered_json out;
    const double makespan = *std::max_element(app_end_.begin(), app_end_.end());
    out["makespan"] = makespan;
    out["forwarding"] = c_.forwarding;
    out["scheduler"] = c_.forwarding ? c_.scheduler : "none";
    for (size_t a = 0; a < c_.apps.size(); ++a) {
      const auto& app = c_.apps[a];
      if (app.idle) continue;
      const double bytes = static_cast<double>(app.request) * app.requests * app.clients;
      out["apps"].push_back({{"name", app.name},
                             {"bytes", bytes},
                             {"time", app_end_[a]},
                             {"bandwidth", app_end_[a] > 0 ? bytes / app_end_[a] : 0.0}});
    }
    out["requests"] = requests_;
    out["completed"] = completed_;
    out["dispatches"] = dispatches_;
    out["mean_dispatch_bytes"] =
        dispatches_ ? dispatch_bytes_ / static_cast<double>(dispatches_) : 0;
    if (c_.forwarding) out["node_max_servers"] = node_max_servers_;
    for (const auto& load : loads_) {
      nlohmann::ordered_json s;
      s["mean_concurrency"] = makespan > 0 ? load.area / makespan : 0;
      s["mean_concurrency_when_busy"] = load.busy > 0 ? load.area / load.busy : 0;
      s["max_concurrency"] = load.max_active;
      s["busy_fraction"] = makespan > 0 ? load.busy / makespan : 0;
      // At most 200 points of the timeline, for plots.
      nlohmann::ordered_json points = nlohmann::ordered_json::array();
      const size_t step = std::max<size_t>(1, load.timeline.size() / 200);
      for (size_t i = 0; i < load.timeline.size(); i += step)
        points.push_back({load.timeline[i].first, load.timeline[i].second});
      s["timeline"] = points;
      out["servers"].push_back(s);
    }
    return out;
  }

 private:
  /// Moves `bytes` of each server piece between `host` and the server, with the disk access,
  /// all pieces at once; returns when every piece is done.
  void transfer(sg4::Host* host, const std::map<int, std::uint64_t>& pieces, core::Op op) {
    auto* done = sg4::Mailbox::by_name("pieces-" + std::to_string(next_box_++));
    for (const auto& piece : pieces) {
      // Named copies: clang (14, clang-tidy's) cannot capture structured bindings.
      const int server = piece.first;
      const std::uint64_t bytes = piece.second;
      sg4::Actor::create("piece", host, [this, host, server, bytes, op, done] {
        auto* server_host = server_hosts_[static_cast<size_t>(server)];
        auto& load = loads_[static_cast<size_t>(server)];
        if (op == core::Op::Write) {
          sg4::Comm::sendto(host, server_host, bytes);
          load.change(+1);
          disks_[static_cast<size_t>(server)]->write(bytes);
          load.change(-1);
        } else {
          load.change(+1);
          disks_[static_cast<size_t>(server)]->read(bytes);
          load.change(-1);
          sg4::Comm::sendto(server_host, host, bytes);
        }
        done->put(new int(0), 0);
      });
    }
    for (size_t i = 0; i < pieces.size(); ++i) delete done->get<int>();
  }

  void run_client(size_t app, int node, int client, const std::vector<ClientRequest>& requests) {
    auto* me = client_hosts_[static_cast<size_t>(client)];
    auto* reply = sg4::Mailbox::by_name("client-" + std::to_string(client));
    const core::Op op = c_.apps[app].op;
    for (const auto& r : requests) {
      ++requests_;
      if (!c_.forwarding) {
        transfer(me, striping_.split(r.file, r.offset, r.length), op);
      } else {
        auto* message = new NodeMessage();
        message->request = {next_id_++,
                            r.file,
                            r.offset,
                            r.length,
                            op,
                            static_cast<core::AppId>(app),
                            striping_.server_of(r.file, r.offset),
                            0};
        message->reply = reply;
        message->client = me;
        // A write's data goes to the node first; a read's comes back with the reply. The request
        // itself is a message of no size: the node waits for it with a timeout (windows), and a
        // transfer in progress must not be cut by that timeout.
        auto* node_host = node_hosts_[static_cast<size_t>(node)];
        sg4::Comm::sendto(me, node_host, op == core::Op::Write ? r.length : kControlBytes);
        node_box(node)->put(message, 0);
        delete reply->get<int>();
      }
      ++completed_;
    }
    app_end_[app] = std::max(app_end_[app], sg4::Engine::get_clock());
  }

  sg4::Mailbox* node_box(int node) { return sg4::Mailbox::by_name("fwd-" + std::to_string(node)); }

  void start_dispatch(int node, req::Dispatch d) {
    ++dispatches_;
    dispatch_bytes_ += static_cast<double>(d.length);
    auto* me = node_hosts_[static_cast<size_t>(node)];
    auto* inbox = node_box(node);
    sg4::Actor::create("dispatch", me, [this, me, inbox, node, d = std::move(d)] {
      const double start = sg4::Engine::get_clock();
      const auto pieces = striping_.split(d.file, d.offset, d.length);
      auto& talking = node_servers_[static_cast<size_t>(node)];
      for (const auto& [server, bytes] : pieces) talking[server] += 1;
      node_max_servers_[static_cast<size_t>(node)] =
          std::max(node_max_servers_[static_cast<size_t>(node)], talking.size());
      transfer(me, pieces, d.op);
      for (const auto& [server, bytes] : pieces)
        if (--talking[server] == 0) talking.erase(server);
      auto* message = new NodeMessage();
      message->done = true;
      message->parts = d.parts;
      message->latency = sg4::Engine::get_clock() - start;
      inbox->put(message, 0);
    });
  }

  void run_node(int node) {
    auto* me = node_hosts_[static_cast<size_t>(node)];
    const auto scheduler = req::make_request_scheduler(c_.scheduler, node_options(c_, node));
    std::unordered_map<req::RequestId, std::pair<sg4::Mailbox*, sg4::Host*>> waiting;
    std::unordered_map<req::RequestId, core::Op> ops;
    std::size_t finished = 0;
    int inflight = 0;
    std::deque<req::Dispatch> ready;
    req::Time timer_at = req::kNever;  ///< the pending timer's time
    const std::size_t expected = node_expected_[static_cast<size_t>(node)];
    auto* inbox = node_box(node);
    while (finished < expected) {
      const req::Time now = req::from_seconds(sg4::Engine::get_clock());
      req::Time retry = req::kNever;
      // The scheduler is asked only when an I/O thread is free (as AGIOS is by IOFSL's
      // threads); dispatches it gives beyond the free threads wait their turn, in its order.
      for (;;) {
        while (inflight < c_.node_threads && !ready.empty()) {
          start_dispatch(node, std::move(ready.front()));
          ready.pop_front();
          ++inflight;
        }
        if (inflight >= c_.node_threads) break;
        req::Batch batch = scheduler->dequeue(now);
        for (auto& d : batch.dispatches) ready.push_back(std::move(d));
        retry = batch.retry_at;
        if (batch.dispatches.empty() || retry > now) {
          while (inflight < c_.node_threads && !ready.empty()) {
            start_dispatch(node, std::move(ready.front()));
            ready.pop_front();
            ++inflight;
          }
          break;
        }
      }
      // A window or quantum ends at `retry`: a timer message wakes the node then. (A get with a
      // timeout could cut a message arriving at the same instant.)
      if (retry != req::kNever && retry < timer_at) {
        timer_at = retry;
        const double at = req::to_seconds(retry);
        sg4::Actor::create("timer", me, [inbox, at] {
          sg4::this_actor::sleep_until(at);
          auto* tick = new NodeMessage();
          tick->timer = true;
          inbox->put(tick, 0);
        });
      }
      auto* message = inbox->get<NodeMessage>();
      if (message->timer) {
        if (req::from_seconds(sg4::Engine::get_clock()) >= timer_at) timer_at = req::kNever;
        delete message;
        continue;
      }
      std::unique_ptr<NodeMessage> owned(message);
      if (!owned->done) {
        owned->request.arrival = req::from_seconds(sg4::Engine::get_clock());
        waiting[owned->request.id] = {owned->reply, owned->client};
        ops[owned->request.id] = owned->request.op;
        scheduler->enqueue(owned->request);
        continue;
      }
      --inflight;
      for (const auto& part : owned->parts) {
        scheduler->release(part.id, req::from_seconds(owned->latency));
        const auto [reply, client] = waiting.at(part.id);
        const std::uint64_t bytes = ops.at(part.id) == core::Op::Read ? part.length : kControlBytes;
        reply->put_init(new int(0), bytes)->detach();
        waiting.erase(part.id);
        ops.erase(part.id);
        ++finished;
      }
    }
  }

  const Config& c_;
  Striping striping_;
  std::vector<sg4::Host*> client_hosts_, node_hosts_, server_hosts_;
  std::vector<sg4::Disk*> disks_;
  std::vector<ServerLoad> loads_;
  std::vector<std::size_t> node_expected_;
  std::vector<std::map<int, int>> node_servers_;  ///< per node: servers it has requests at now
  std::vector<std::size_t> node_max_servers_;     ///< per node: most servers at once
  std::vector<double> app_end_;
  req::RequestId next_id_ = 1;
  std::uint64_t next_box_ = 0;
  std::uint64_t requests_ = 0, completed_ = 0, dispatches_ = 0;
  double dispatch_bytes_ = 0;
};

}  // namespace

nlohmann::ordered_json simulate(const Config& config, double& wall) {
  Run run(config);
  run.build();
  run.start();
  const auto started = std::chrono::steady_clock::now();
  sg4::Engine::get_instance()->run();
  wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return run.results();
}

}  // namespace harmonia::fwdsim
