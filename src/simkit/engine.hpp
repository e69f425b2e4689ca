#pragma once
/// @file The SimGrid engine as every Harmonia simulator sets it up, and what their `main`s share:
/// the `--perf` file and the exit codes.

#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>
#include <string>

namespace harmonia::simkit {

/// Exit codes of the simulators: bad input (nothing written), and a run that failed.
constexpr int kBadInput = 2;
constexpr int kRunFailed = 1;

/// This process's one SimGrid engine (SimGrid cannot restart it). SimGrid gets no command-line
/// options of its own, logs only critical messages, and shares bandwidth as a clean fluid: CM02
/// without cross-traffic (LV08, the default, scales bandwidth and latency and adds reverse
/// traffic; see docs/simulator.md).
class Engine {
 public:
  explicit Engine(char* program);
  /// Runs the simulation to its end.
  void run() { engine_.run(); }

 private:
  int argc_ = 1;
  char* argv_[2];
  simgrid::s4u::Engine engine_;
};

/// Writes the `--perf` file: the wall time, the program's own figures, then its peak resident
/// memory (kB).
void write_perf(const std::string& path, double wall_seconds,
                const nlohmann::ordered_json& figures);

}  // namespace harmonia::simkit
