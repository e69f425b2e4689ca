#include "simkit/engine.hpp"

#include <sys/resource.h>

#include "common/write_atomically.hpp"

namespace harmonia::simkit {

Engine::Engine(char* program) : argv_{program, nullptr}, engine_(&argc_, argv_) {
  xbt_log_control_set("root.thresh:critical");
  engine_.set_config("network/model:CM02");
  engine_.set_config("network/crosstraffic:0");
}

void write_perf(const std::string& path, double wall_seconds,
                const nlohmann::ordered_json& figures) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  nlohmann::ordered_json perf = {{"wall_s", wall_seconds}};
  perf.update(figures);
  perf["peak_rss_kb"] = usage.ru_maxrss;
  common::write_atomically(path, perf.dump(2));
}

}  // namespace harmonia::simkit
