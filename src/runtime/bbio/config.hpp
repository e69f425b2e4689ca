#pragma once
// Staging configuration from the environment (docs/staging-library.md) or from BBIO_Init, and
// the rest of what the library reads from the environment: every variable is read here, once,
// with one strictness.

#include <cstddef>
#include <cstdint>
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
  /// HARMONIA_SMALL_FILE: a file of a granted phase that the buffer nodes never received a byte
  /// of, and that holds at most this many bytes gathered at its close, is written to the PFS
  /// there (as plain I/O would) instead of going to a node; 0: every file goes to the nodes.
  size_t small_file = 64UL << 10;
  /// The largest small_file: what a file's gathered small writes hold at most (kGather).
  static constexpr size_t kMaxSmallFile = 1UL << 20;
  std::vector<std::string> include;  ///< path prefixes to stage (empty: all)
  std::vector<std::string> exclude;  ///< path prefixes never staged
  std::string phase_trace;           ///< JSON-lines trace of I/O phases, if set
  double phase_gap = 1.0;            ///< idle seconds that end a detected phase
  /// Request scheduler that orders (and may aggregate) a file's staged writes when it is flushed
  /// (HARMONIA_FLUSH_SCHEDULER="name[,option=value...]"); empty: the order they were written.
  std::string flush_scheduler;
  std::map<std::string, std::string> flush_options;
  /// Seconds a read, fsync or close waits for a buffer node that holds bytes of its file and is
  /// down (HARMONIA_NODE_WAIT) before it fails with EIO.
  double node_wait = 30.0;
  /// Seconds the scheduler daemon (or node agent) may leave a request unanswered before the
  /// process gives it up and writes through on its own (HARMONIA_SCHEDD_TIMEOUT).
  double schedd_timeout = 1.0;
  bool debug = false;  ///< HARMONIA_DEBUG=1: report at start-up what the library does not handle

  /// Whether a file at absolute `path` may be staged.
  bool wants(const std::string& path) const;
};

/// Who this process is, for the scheduler daemon (docs/control.md, "Registration").
struct Identity {
  std::string job;      ///< HARMONIA_JOB, else slurm-$SLURM_JOB_ID[.$SLURM_STEP_ID]; "": none
  std::string mpi_job;  ///< PMIX_NAMESPACE or OMPI_MCA_orte_ess_jobid (the agent adds @host)
  std::string name;     ///< HARMONIA_JOB_NAME or SLURM_JOB_NAME; "": the program's name
  std::uint32_t rank = 0, ranks = 1;
  std::int32_t priority = 0;     ///< HARMONIA_PRIORITY
  double bytes_per_process = 0;  ///< HARMONIA_BYTES_PER_PROCESS; 0: not declared
  bool cached = false;           ///< HARMONIA_HINT=cached
  std::string io_qos;            ///< HARMONIA_IO_QOS; the daemon checks it (docs/accounting.md)
};

/// A file of HARMONIA_PREFETCH: one the job will read, announced to the scheduler daemon so that
/// the buffer nodes can stage it in (docs/staging-library.md, "Prefetched reads").
struct PrefetchFile {
  std::string path;  ///< absolute, every link resolved
  std::string name;  ///< relative to HARMONIA_BUFFER_ROOT, as the daemon and the nodes name it
};

/// The process's environment as the library uses it.
struct Environment {
  /// HARMONIA_STAGE, HARMONIA_STAGE_DIR, HARMONIA_STAGE_SIZE, HARMONIA_SMALL_FILE,
  /// HARMONIA_STAGE_INCLUDE,
  /// HARMONIA_STAGE_EXCLUDE, HARMONIA_PHASE_TRACE, HARMONIA_PHASE_GAP, HARMONIA_FLUSH_SCHEDULER,
  /// HARMONIA_NODE_WAIT, HARMONIA_SCHEDD_TIMEOUT and HARMONIA_DEBUG.
  Config config;
  Identity identity;
  std::string schedd;       ///< HARMONIA_SCHEDD: the scheduler daemon; "": no agent
  std::string buffer_root;  ///< HARMONIA_BUFFER_ROOT, resolved; "": unset or missing
  std::string pfs_root;     ///< HARMONIA_PFS_ROOT; "": unset
  /// HARMONIA_PREFETCH, resolved when the environment is read: the files beneath the buffer root
  /// (at most kMaxPrefetch, each once). The entries it cannot use are left out, and said in
  /// `notes`: they change nothing else.
  std::vector<PrefetchFile> prefetch;
  static constexpr std::size_t kMaxPrefetch = 1024;
  /// One message per HARMONIA_PREFETCH entry left out, said once on stderr.
  std::vector<std::string> notes;
  /// One message per variable the library cannot use, naming it and its value. Any: nothing is
  /// staged (config.enabled is false) and no agent starts; the program's I/O is plain.
  std::vector<std::string> errors;
};

/// The environment, read on first use and never again (a program that changes it later changes
/// nothing here).
const Environment& environment();
/// Reads the environment now (environment() keeps the first reading).
Environment read_environment();

/// Checks that `dir` is a writable directory; returns an error message or "".
std::string check_stage_dir(const std::string& dir);

using common::parse_size;

}  // namespace harmonia::bbio
