#pragma once
// Staging configuration from the environment (docs/staging-library.md) or from BBIO_Init.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/size.hpp"

namespace harmonia::bbio {

struct Config {
  bool enabled = true;
  std::optional<std::string> stage_dir;  ///< on-disk logs here; RAM when empty
  size_t file_capacity = 256UL << 20;    ///< most bytes one file holds staged
  std::vector<std::string> include;      ///< path prefixes to stage (empty: all)
  std::vector<std::string> exclude;      ///< path prefixes never staged
  std::string phase_trace;               ///< JSON-lines trace of I/O phases, if set
  double phase_gap = 1.0;                ///< idle seconds that end a detected phase
  /// Request scheduler that orders (and may aggregate) a file's staged writes when it is flushed
  /// (HARMONIA_FLUSH_SCHEDULER="name[,option=value...]"); empty: the order they were written.
  std::string flush_scheduler;
  std::map<std::string, std::string> flush_options;
  /// Seconds a read, fsync or close waits for a buffer node that holds bytes of its file and is
  /// down (HARMONIA_NODE_WAIT) before it fails with EIO.
  double node_wait = 30.0;
  bool debug = false;  ///< HARMONIA_DEBUG=1: report at start-up what the library does not handle

  /// Whether a file at absolute `path` may be staged.
  bool wants(const std::string& path) const;
};

/// Reads HARMONIA_STAGE, HARMONIA_STAGE_DIR, HARMONIA_STAGE_SIZE, HARMONIA_STAGE_INCLUDE,
/// HARMONIA_STAGE_EXCLUDE, HARMONIA_PHASE_TRACE, HARMONIA_PHASE_GAP, HARMONIA_FLUSH_SCHEDULER,
/// HARMONIA_NODE_WAIT and HARMONIA_DEBUG.
/// On a bad value, `error` names the variable and the problem, and the returned config has staging
/// disabled.
Config config_from_environment(std::string& error);

/// Checks that `dir` is a writable directory; returns an error message or "".
std::string check_stage_dir(const std::string& dir);

using common::parse_size;

}  // namespace harmonia::bbio
