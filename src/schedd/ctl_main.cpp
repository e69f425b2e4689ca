// harmonia-schedctl: status of a running harmonia-schedd, and its control-plane benchmarks.
#include <google/protobuf/util/json_util.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "control/client.hpp"
#include "schedd/server.hpp"

using namespace harmonia::schedd;
using harmonia::control::Client;
using harmonia::control::Envelope;

namespace {

void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

Envelope registration(const std::string& job, std::uint32_t rank) {
  Envelope request;
  auto* r = request.mutable_register_process();
  r->set_protocol_version(harmonia::control::VERSION_CURRENT);
  r->set_job(job);
  r->set_name("schedctl-load");
  r->set_rank(rank);
  r->set_ranks(1);
  r->set_pid(static_cast<std::uint32_t>(getpid()));
  return request;
}

void expect_ok(const Envelope& reply, const char* what) {
  if (reply.has_error())
    throw std::runtime_error(std::string(what) + ": " + reply.error().message());
}

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

int status(const std::string& address, bool json) {
  Client client(address);
  Envelope request;
  request.mutable_status_request();
  const Envelope reply = client.call(request);
  expect_ok(reply, "status");
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !json;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(reply.status(), &text, options);
  std::cout << text << (json ? "\n" : "");
  return 0;
}

/// Connection set-up (over TCP with munged: connect and authenticate) and the round trips of
/// the three calls a job makes at its start (register, phase begin, and the directive that comes
/// with every reply), each on a fresh job.
int round_trips(const std::string& address, int count) {
  std::vector<double> connect, reg, begin, end;
  for (int k = 0; k < count; ++k) {
    const double before = monotonic_seconds();
    Client client(address);
    double t0 = monotonic_seconds();
    connect.push_back((t0 - before) * 1e6);
    expect_ok(
        client.call(registration("rtt-" + std::to_string(getpid()) + "-" + std::to_string(k), 0)),
        "register");
    double t1 = monotonic_seconds();
    Envelope phase;
    phase.mutable_phase_begin()->set_name("rtt");
    expect_ok(client.call(phase), "phase begin");
    double t2 = monotonic_seconds();
    Envelope done;
    done.mutable_phase_end();
    expect_ok(client.call(done), "phase end");
    double t3 = monotonic_seconds();
    reg.push_back((t1 - t0) * 1e6);
    begin.push_back((t2 - t1) * 1e6);
    end.push_back((t3 - t2) * 1e6);
  }
  std::printf("{\"count\": %d", count);
  for (const auto& [name, values] :
       {std::pair{"connect", &connect}, std::pair{"register", &reg},
        std::pair{"phase_begin", &begin}, std::pair{"phase_end", &end}})
    std::printf(", \"%s_us\": {\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}", name,
                percentile(*values, 0.5), percentile(*values, 0.99),
                *std::max_element(values->begin(), values->end()));
  std::printf("}\n");
  return 0;
}

/// Registers `jobs` jobs (one connection each), then sends `events` phase events (begin and end
/// in turn) from `active` of them, `depth` requests in flight per connection.
int load(const std::string& address, int jobs, long events, int active, int depth) {
  raise_descriptor_limit();
  std::vector<std::unique_ptr<Client>> clients;
  const double t0 = monotonic_seconds();
  for (int k = 0; k < jobs; ++k) {
    clients.push_back(std::make_unique<Client>(address));
    expect_ok(clients.back()->call(
                  registration("load-" + std::to_string(getpid()) + "-" + std::to_string(k), 0)),
              "register");
  }
  const double registered = monotonic_seconds();
  active = std::min(active, jobs);
  std::vector<bool> in_phase(static_cast<size_t>(active), false);
  long sent = 0;
  const double t1 = monotonic_seconds();
  while (sent < events) {
    for (int c = 0; c < active && sent < events; ++c) {
      int burst = 0;
      for (; burst < depth && sent < events; ++burst, ++sent) {
        Envelope e;
        if (in_phase[static_cast<size_t>(c)])
          e.mutable_phase_end();
        else
          e.mutable_phase_begin();
        in_phase[static_cast<size_t>(c)] = !in_phase[static_cast<size_t>(c)];
        clients[static_cast<size_t>(c)]->send(e);
      }
      for (int got = 0; got < burst;) {
        const Envelope reply = clients[static_cast<size_t>(c)]->receive();
        if (reply.seq() == 0) continue;  // a pushed directive
        expect_ok(reply, "phase event");
        ++got;
      }
    }
  }
  const double t2 = monotonic_seconds();
  std::printf(
      "{\"jobs\": %d, \"registration_s\": %.3f, \"registrations_per_s\": %.0f, \"events\": %ld, "
      "\"active\": %d, \"depth\": %d, \"events_s\": %.3f, \"events_per_s\": %.0f}\n",
      jobs, registered - t0, jobs / (registered - t0), events, active, depth, t2 - t1,
      static_cast<double>(events) / (t2 - t1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Query harmonia-schedd, or measure its control plane"};
  std::string address = "/tmp/harmonia-schedd.sock";
  cli.add_option("--address", address, "unix:PATH, tcp:HOST:PORT or a socket path")
      ->capture_default_str();
  bool json = false;
  auto* status_cmd = cli.add_subcommand("status", "Jobs, phases and directives, as JSON");
  status_cmd->add_flag("--compact", json, "One line");
  int count = 1000;
  auto* rtt_cmd = cli.add_subcommand("rtt", "Round trips: register, phase begin, phase end");
  rtt_cmd->add_option("--count", count, "Jobs to time")->check(CLI::PositiveNumber);
  int jobs = 10000, active = 64, depth = 16;
  long events = 200000;
  auto* load_cmd = cli.add_subcommand("load", "Registered jobs and phase events per second");
  load_cmd->add_option("--jobs", jobs, "Jobs to register")->check(CLI::PositiveNumber);
  load_cmd->add_option("--events", events, "Phase events to send")->check(CLI::PositiveNumber);
  load_cmd->add_option("--active", active, "Jobs sending events")->check(CLI::PositiveNumber);
  load_cmd->add_option("--depth", depth, "Requests in flight per job")->check(CLI::PositiveNumber);
  cli.require_subcommand(1);
  CLI11_PARSE(cli, argc, argv);
  try {
    if (*status_cmd) return status(address, json);
    if (*rtt_cmd) return round_trips(address, count);
    return load(address, jobs, events, active, depth);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-schedctl: %s\n", error.what());
    return 1;
  }
}
