#include "netsim/simulation.hpp"

#include <algorithm>
#include <cmath>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/simix.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "netsim/packet_network.hpp"
#include "simkit/platform.hpp"

namespace sg4 = simgrid::s4u;

namespace harmonia::netsim {

namespace {
/// Runs `code` in SimGrid's kernel (the kernel's timers are not for actors to touch).
template <class Code>
void kernel_call(Code&& code) {
  simgrid::kernel::actor::simcall_answered(std::forward<Code>(code));
}
}  // namespace

std::vector<sg4::Host*> build_fabric(const Fabric& fabric, double link_bw) {
  // Zero latency: CM02 weights a flow's share by its route latency, which would favour short
  // routes; propagation delay is added per hop outside the solver instead (see run_client).
  simkit::Network network;
  network.tree = simkit::FatTree{static_cast<unsigned>(fabric.levels()), fabric.down(), fabric.up(),
                                 std::vector<unsigned>(fabric.down().size(), 1)};
  network.link_bw = link_bw;
  return std::move(simkit::build_network(network, {{"node", fabric.nodes()}}).front());
}

std::vector<sg4::Host*> build_network(const Config& config, const Fabric& fabric) {
  if (config.model == NetworkModel::Fluid) return build_fabric(fabric, config.link_bw);
  select_packet_model(config.packet);
  return build_packet_fabric(fabric, config.link_bw, config.hop_latency, config.packet);
}

Simulation::Simulation(const Config& config, const Fabric& fabric, const Layout& layout)
    : config_(config),
      fabric_(fabric),
      layout_(layout),
      hosts_(build_network(config, fabric)),
      result_(fabric) {
  if (config.mpi.enabled)
    partner_ = pair_clients(static_cast<long>(layout.mpi_clients.size()), config.seed);
  done_ = sg4::Semaphore::create(0);
}

void Simulation::stop(const char* reason) {
  if (stopping_) return;
  stopping_ = true;
  result_.stop_reason = reason;
  done_->release();
}

void Simulation::run_client(Traffic traffic, long index) {
  const bool mpi = traffic == Traffic::Mpi;
  const JobConfig& job = mpi ? config_.mpi : config_.io;
  JobResult& out = mpi ? result_.mpi : result_.io;
  const long node = mpi ? layout_.mpi_clients[static_cast<size_t>(index)]
                        : layout_.io_clients[static_cast<size_t>(index)];
  // Each client draws from its own stream, so a job's draws are the same alone and together.
  Rng rng =
      Rng::stream(config_.seed, mpi ? "mpi-client" : "io-client", static_cast<uint64_t>(index));
  ServerCycle cycle(static_cast<long>(layout_.servers.size()), config_.server_order, rng);
  const long partner =
      mpi ? layout_.mpi_clients[static_cast<size_t>(partner_[static_cast<size_t>(index)])] : -1;
  const long quota = job.warmup + job.samples;
  const auto size = static_cast<uint64_t>(job.size);
  std::vector<Hop> route;

  const size_t slot = static_cast<size_t>(index) + (mpi ? 0 : layout_.mpi_clients.size());
  sleep_client_until(slot, job.pacing.first_start(rng));
  for (long k = 0; !stopping_; ++k) {
    if (config_.max_transfers > 0 && result_.transfers_started >= config_.max_transfers) {
      stop("max_transfers");
      return;
    }
    const long dst = mpi ? partner : layout_.servers[static_cast<size_t>(cycle.next(rng))];
    fabric_.route(node, dst, route);
    ++result_.transfers_started;
    const double start = sg4::Engine::get_clock();
    sg4::Comm::sendto(hosts_[static_cast<size_t>(node)], hosts_[static_cast<size_t>(dst)], size);
    // A fluid transfer's last byte arrives one propagation delay after SimGrid ends it; a
    // packet-level transfer ends when its last byte is acknowledged, delays included.
    const double end =
        sg4::Engine::get_clock() + (config_.model == NetworkModel::Fluid
                                        ? config_.hop_latency * static_cast<double>(route.size())
                                        : 0.0);
    ++out.transfers;
    out.bytes += job.size;
    if (config_.link_loads) result_.loads.add(traffic, route, job.size);
    if (k >= job.warmup && k < quota) out.latencies.push_back(end - start);
    if (k + 1 == quota) {
      out.quota_time = std::max(out.quota_time, end);
      if (job.measured && --clients_waited_ == 0) stop("quota");
      if (job.finite) return;
    }
    const double next = job.pacing.next_start(start, end, rng);
    if (next > sg4::Engine::get_clock()) sleep_client_until(slot, next);
  }
}

double Simulation::timer_date(double date) const {
  // ns-3 runs in whole nanoseconds, rounding the time SimGrid gives it to the nearest one: a
  // timer a quarter of a nanosecond before a whole one makes ns-3 run to that one, past the
  // timer, which then fires (a date between two whole nanoseconds ns-3 might never pass).
  const double now_ns = std::round(sg4::Engine::get_clock() * 1e9);
  return (std::max(std::ceil(date * 1e9), now_ns + 1) - 0.25) * 1e-9;
}

void Simulation::sleep_client_until(size_t slot, double wake_date) {
  if (config_.model == NetworkModel::Fluid) {
    sg4::this_actor::sleep_until(wake_date);
    return;
  }
  if (wake_date <= sg4::Engine::get_clock()) return;
  const double date = timer_date(wake_date);
  auto wake = sg4::Semaphore::create(0);
  kernel_call([this, slot, date, wake] {
    wake_timers_[slot] = simgrid::kernel::timer::Timer::set(date, [this, slot, wake] {
      wake_timers_[slot] = nullptr;  // a timer deletes itself once it has fired
      wake->release();
    });
  });
  wake->acquire();
}

void Simulation::cancel_timers() {
  kernel_call([this] {
    for (auto*& timer : wake_timers_)
      if (timer != nullptr) std::exchange(timer, nullptr)->remove();
    if (limit_timer_ != nullptr) std::exchange(limit_timer_, nullptr)->remove();
  });
}

RunResult Simulation::run() {
  wake_timers_.assign(layout_.mpi_clients.size() + layout_.io_clients.size(), nullptr);
  for (auto [traffic, job, clients] : {std::tuple{Traffic::Mpi, &config_.mpi, &layout_.mpi_clients},
                                       std::tuple{Traffic::Io, &config_.io, &layout_.io_clients}}) {
    if (!job->enabled) continue;
    (traffic == Traffic::Mpi ? result_.mpi : result_.io).clients =
        static_cast<long>(clients->size());
    if (job->measured) clients_waited_ += static_cast<long>(clients->size());
    for (size_t i = 0; i < clients->size(); ++i) {
      const long node = (*clients)[i];
      const Traffic kind = traffic;  // clang 14 (clang-tidy's) cannot capture a structured binding
      // Clients are daemons: the run ends when the controller below returns.
      sg4::Actor::create((kind == Traffic::Mpi ? "mpi-" : "io-") + std::to_string(i),
                         hosts_[static_cast<size_t>(node)],
                         [this, kind, i] { run_client(kind, static_cast<long>(i)); })
          ->daemonize();
    }
  }
  if (clients_waited_ == 0) throw std::runtime_error("no clients: the measured jobs are empty");
  sg4::Actor::create("controller", hosts_.front(), [this] {
    const bool fluid = config_.model == NetworkModel::Fluid;
    if (config_.max_time > 0 && fluid) {
      if (done_->acquire_timeout(config_.max_time)) stop("max_time");
    } else {
      if (config_.max_time > 0)
        kernel_call([this] {
          limit_timer_ = simgrid::kernel::timer::Timer::set(timer_date(config_.max_time), [this] {
            limit_timer_ = nullptr;
            stop("max_time");
          });
        });
      done_->acquire();
    }
    // Nothing that is still asleep counts now; their timers would keep the simulation going.
    cancel_timers();
    // A client's last byte arrives one propagation delay after SimGrid's transfer ends.
    result_.end_time =
        std::max({sg4::Engine::get_clock(), result_.mpi.quota_time, result_.io.quota_time});
  });
  sg4::Engine::get_instance()->run();
  if (result_.stop_reason.empty())
    throw std::runtime_error(
        "the simulation ended before the run did (SimGrid found its actors "
        "deadlocked)");
  if (config_.model == NetworkModel::Packet) result_.packet_drops = packet_drops();
  return std::move(result_);
}

}  // namespace harmonia::netsim
