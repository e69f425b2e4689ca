// harmonia-schedd: the scheduler daemon of the coordination service (docs/control.md). Its
// settings come from the command line, the environment and the site file (docs/configuration.md).
#include <google/protobuf/stubs/logging.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>

#include "common/accounting.hpp"
#include "common/identity.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "common/write_atomically.hpp"
#include "config/site.hpp"
#include "core/lookahead.hpp"
#include "schedd/metrics.hpp"
#include "schedd/server.hpp"

using namespace harmonia::schedd;
namespace coord = harmonia::core::coordination;
namespace logging = harmonia::common::log;

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Scrapes served from the daemon's own thread: the endpoint's thread asks, the event loop
/// renders at its next tick (the service is not shared between threads), the endpoint answers.
class ScrapeQueue {
 public:
  /// On the endpoint's thread: the text rendered for this scrape ("" when the loop is stopping).
  std::string ask() {
    std::unique_lock lock(mutex_);
    const auto wanted = ++asked_;
    answered_.wait_for(lock, std::chrono::seconds(5), [&] { return rendered_ >= wanted; });
    return text_;
  }
  /// On the event loop: renders when a scrape waits.
  void serve(const std::function<std::string()>& render) {
    {
      std::lock_guard lock(mutex_);
      if (rendered_ == asked_) return;
    }
    std::string text = render();
    {
      std::lock_guard lock(mutex_);
      text_ = std::move(text);
      rendered_ = asked_;
    }
    answered_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable answered_;
  std::uint64_t asked_ = 0, rendered_ = 0;
  std::string text_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Harmonia scheduler daemon: coordinates the I/O of jobs running libharmonia"};
  static harmonia::config::Site site;
  auto settings = harmonia::config::declare(site, harmonia::config::Names::registered());
  settings.add_options(cli, harmonia::common::kSchedd);
  CLI11_PARSE(cli, argc, argv);
  auto errors = settings.apply(harmonia::common::kSchedd);
  auto& config = site.scheduler;
  ServiceConfig& service = config.service;
  ServerConfig& server = config.server;
  if (errors.empty() && settings.show_requested()) {
    std::cout << settings.show(harmonia::common::kSchedd);
    return 0;
  }
  if (errors.empty() && config.buffer_count == 0 &&
      (!config.record.empty() || !config.accounting.empty()))
    errors.push_back(
        "--record and --accounting (schedd.record, schedd.accounting) need buffer "
        "nodes (--buffers, policy.buffers)");
  if (errors.empty() && server.unix_path.empty() && server.tcp.empty())
    errors.push_back(
        "nothing to listen on: give a Unix socket (--socket, schedd.socket) or a "
        "TCP address (--tcp, schedd.tcp)");
  if (!errors.empty()) {
    for (const auto& line : errors) std::fprintf(stderr, "harmonia-schedd: %s\n", line.c_str());
    return 2;
  }
  // SIGINT and SIGTERM are read by the event loop (Server's signalfd): blocked before any other
  // thread starts (the log's stderr reader with syslog or json, the metrics endpoint), which
  // inherit the mask. A thread that did not block them would take a SIGTERM's default action and
  // end the daemon without its record and accounting files.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  logging::configure("harmonia-schedd", site.shared.log_target, site.shared.log_level);

  const auto& shared = site.shared;
  service.admins.uids = shared.admin_uids;
  server.tcp_credentials = shared.auth == "munge";
  server.admins = service.admins;
  auto checker = std::make_shared<harmonia::common::CredentialChecker>(
      "harmonia-schedd", shared.munge_socket, shared.auth_window);
  // Clients over TCP send a credential wherever munged makes one, also where the kernel names
  // them: it may confirm their user there, never name another.
  service.confirm_credential = [checker](uid_t known, const std::string& credential,
                                         std::string& why) {
    return checker->confirms(known, credential, why);
  };
  if (shared.auth == "munge")
    service.check_credential = [checker](const std::string& credential, std::string& why) {
      return checker->check(credential, why);
    };
  service.node_uids.push_back(geteuid());
  SchedulerMeters meters;
  meters.started_at = unix_seconds();
  if (!config.metrics.empty()) {
    server.after_request = [&meters](double seconds) { meters.decision.observe(seconds); };
    config.buffers.on_phase_granted = [&meters](double seconds) {
      meters.phase_wait.observe(seconds);
    };
  }
  if (!config.io_classes.empty()) {
    config.buffers.pricing.classes.clear();
    for (const auto& text : config.io_classes) {
      std::string why;
      config.buffers.pricing.classes.push_back(*harmonia::config::parse_io_class(text, why));
    }
  }
  if (config.buffer_count > 0) {
    config.buffers.count = config.buffer_count;
    service.buffers = config.buffers;
  }

  // One descriptor per connected process: 10,000 jobs need more than the usual 1024.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  // Malformed frames get an error reply; libprotobuf's own log line for each would let any
  // client fill the daemon's log.
  google::protobuf::SetLogHandler(nullptr);
  try {
    service.coordinator.flush_order = coord::parse_flush_order(config.flush_order);
    Service state(service, monotonic_seconds());
    // Accounting times are Unix times: the daemon's clock is monotonic.
    const double clock_offset = unix_seconds() - monotonic_seconds();
    double accounted_at = -1;
    bool accounting_failed = false;
    const auto write_accounting = [&](double now) {
      try {
        harmonia::common::write_accounting(config.accounting, state.accounting(now, clock_offset));
        accounting_failed = false;
      } catch (const std::exception& error) {
        // A full or read-only disk must not stop the scheduling: said once, retried each second.
        if (!accounting_failed) logging::error(std::string("--accounting: ") + error.what());
        accounting_failed = true;
      }
      accounted_at = now;
    };
    ScrapeQueue scrapes;
    std::unique_ptr<harmonia::common::metrics::Endpoint> endpoint;
    if (!config.metrics.empty())
      endpoint = std::make_unique<harmonia::common::metrics::Endpoint>(
          config.metrics, "--metrics", [&scrapes] { return scrapes.ask(); });
    server.after_tick = [&](double now) {
      if (!config.accounting.empty() && now - accounted_at >= 1) write_accounting(now);
      if (endpoint) scrapes.serve([&] { return render_metrics(state.status(now), meters); });
    };
    Server listener(state, server);
    if (!server.tcp.empty()) std::printf("tcp_port=%u\n", listener.tcp_port());
    if (endpoint) std::printf("metrics_port=%d\n", endpoint->port());
    std::string where;
    if (!server.unix_path.empty()) where += " on " + server.unix_path;
    if (!server.tcp.empty()) where += " on tcp " + server.tcp;
    if (endpoint) where += ", metrics on http://" + endpoint->address() + "/metrics";
    logging::info("listening" + where + " (strategy " + service.strategy + ", flush order " +
                  config.flush_order +
                  (service.buffers ? ", buffer policy " + service.buffers->policy : "") +
                  "; auth " + shared.auth +
                  (settings.config_path().empty() ? "" : "; " + settings.config_path()) + ")");
    std::fflush(stdout);
    listener.run();
    if (!config.record.empty())
      harmonia::common::write_atomically(config.record, state.buffer_results());
    if (!config.accounting.empty()) write_accounting(monotonic_seconds());
    logging::info("stopped");
  } catch (const std::bad_alloc&) {
    logging::error("out of memory");
    return 2;
  } catch (const std::exception& error) {
    logging::error(error.what());
    return 2;
  }
  return 0;
}
