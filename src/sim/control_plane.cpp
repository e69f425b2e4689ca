#include "sim/control_plane.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

namespace sg4 = simgrid::s4u;

namespace harmonia::sim {

ControlPlane::ControlPlane(ControlConfig config, sg4::Host* scheduler, std::uint64_t seed)
    : config_(config), scheduler_(scheduler), busy_(sg4::Mutex::create()), random_(seed) {
  if (config_.ranks_per_node < 0) throw std::invalid_argument("--ranks-per-node must be >= 0");
  if (config_.agent_ranks < 1) throw std::invalid_argument("--agent-ranks must be >= 1");
  if (!(config_.message_seconds >= 0))
    throw std::invalid_argument("--message-seconds must be >= 0");
  if (!(config_.arrival_jitter >= 0)) throw std::invalid_argument("--arrival-jitter must be >= 0");
}

int ControlPlane::per_node() const {
  // A node agent speaks for ranks of its own node only.
  return (config_.ranks_per_node + config_.agent_ranks - 1) / config_.agent_ranks;
}

int ControlPlane::connections(int nodes) const { return nodes * per_node(); }

sg4::Host* ControlPlane::node_of(const std::vector<sg4::Host*>& nodes, int connection) const {
  return nodes[static_cast<size_t>(connection / per_node())];
}

void ControlPlane::handle() {
  busy_->lock();  // FIFO: the scheduler's one thread takes messages in arrival order
  sg4::this_actor::sleep_for(config_.message_seconds);
  busy_->unlock();
}

void ControlPlane::cross(sg4::Host* from, sg4::Host* to) {
  if (from == to) return;
  sg4::Comm::sendto_async(from, to, static_cast<std::uint64_t>(config_.message_bytes))->wait();
}

size_t ControlPlane::slot(int app, int index) {
  const auto key = std::make_pair(app, index);
  const auto found = slots_.find(key);
  if (found != slots_.end()) return found->second;
  phases_.push_back(PhaseControl{app, index});
  handled_at_.push_back(0);
  granted_at_.push_back(0);
  slots_[key] = phases_.size() - 1;
  return phases_.size() - 1;
}

void ControlPlane::phase_begin(int app, int index, const std::vector<sg4::Host*>& nodes,
                               const std::function<void()>& request) {
  const size_t at = slot(app, index);
  const int count = connections(static_cast<int>(nodes.size()));
  const double now = sg4::Engine::get_clock();
  // Each rank reaches the phase somewhere in the jitter window; a connection speaks when the
  // first of its ranks does.
  std::uniform_real_distribution<double> skew(0, config_.arrival_jitter);
  std::vector<double> arrival(static_cast<size_t>(count), std::numeric_limits<double>::infinity());
  for (size_t node = 0; node < nodes.size(); ++node)
    for (int r = 0; r < config_.ranks_per_node; ++r) {
      auto& first = arrival[node * static_cast<size_t>(per_node()) +
                            static_cast<size_t>(r / config_.agent_ranks)];
      first = std::min(first, now + skew(random_));
    }
  phases_[at].connections = count;
  phases_[at].messages += 2LL * count;  // PhaseBegin and its reply
  phases_[at].first_arrival = *std::min_element(arrival.begin(), arrival.end());
  auto reached = sg4::Semaphore::create(0);
  auto first_handled = std::make_shared<bool>(false);
  auto call = std::make_shared<std::function<void()>>(request);
  for (int c = 0; c < count; ++c) {
    sg4::Host* node = node_of(nodes, c);
    const double when = arrival[static_cast<size_t>(c)];
    sg4::Actor::create("phase-begin", node, [this, node, when, at, reached, first_handled, call] {
      sg4::this_actor::sleep_until(when);
      cross(node, scheduler_);
      handle();
      if (!*first_handled) {  // the job is in its phase from its first connection's begin
        *first_handled = true;
        handled_at_[at] = sg4::Engine::get_clock();
        (*call)();
        reached->release();
      }
      cross(scheduler_, node);  // the reply
    });
  }
  reached->acquire();
}

void ControlPlane::granted(int app, int index, const std::vector<sg4::Host*>& nodes) {
  const size_t at = slot(app, index);
  const int count = connections(static_cast<int>(nodes.size()));
  granted_at_[at] = sg4::Engine::get_clock();
  phases_[at].messages += count;  // the grant, pushed to every connection
  std::vector<sg4::ActorPtr> pushes;
  for (int c = 0; c < count; ++c) {
    sg4::Host* node = node_of(nodes, c);
    pushes.push_back(sg4::Actor::create("grant", scheduler_, [this, node] {
      handle();
      cross(scheduler_, node);
    }));
  }
  for (auto& push : pushes) push->join();
  PhaseControl& p = phases_[at];
  p.all_granted = sg4::Engine::get_clock();
  p.overhead = (handled_at_[at] - p.first_arrival) + (p.all_granted - granted_at_[at]);
}

void ControlPlane::phase_end(int app, int index, const std::vector<sg4::Host*>& nodes,
                             const std::function<void()>& complete) {
  const size_t at = slot(app, index);
  const int count = connections(static_cast<int>(nodes.size()));
  phases_[at].messages += 2LL * count;  // PhaseEnd and its reply
  auto ended = sg4::Semaphore::create(0);
  auto remaining = std::make_shared<int>(count);
  auto call = std::make_shared<std::function<void()>>(complete);
  for (int c = 0; c < count; ++c) {
    sg4::Host* node = node_of(nodes, c);
    sg4::Actor::create("phase-end", node, [this, node, ended, remaining, call] {
      cross(node, scheduler_);
      handle();
      if (--*remaining == 0) {  // the job's phase ends with its last connection's end
        (*call)();
        ended->release();
      }
      cross(scheduler_, node);
    });
  }
  ended->acquire();
}

void ControlPlane::lived(int nodes, double seconds) {
  heartbeats_ += static_cast<long long>(connections(nodes)) *
                 static_cast<long long>(std::floor(seconds / config_.heartbeat_seconds));
}

}  // namespace harmonia::sim
