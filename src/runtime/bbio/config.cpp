#include "runtime/bbio/config.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>

#include "common/schedd_timeout.hpp"
#include "core/requests/registry.hpp"
#include "runtime/bbio/buffer_client.hpp"
#include "runtime/bbio/report.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio {

namespace {

// System locations are never staged: the paper stages "all files outside of system directories".
const char* const kSystemPrefixes[] = {"/proc",  "/sys", "/dev",  "/etc",  "/usr", "/lib",
                                       "/lib64", "/bin", "/sbin", "/boot", "/run", "/var/run"};

bool has_prefix(const std::string& path, const std::string& prefix) {
  if (prefix.empty() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || prefix.back() == '/' || path[prefix.size()] == '/';
}

std::vector<std::string> split_paths(const char* text) {
  std::vector<std::string> out;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p == ':' || *p == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return out;
}

/// The value of the first of `names` that is set and not empty (and, in `which`, its name).
const char* first_env(std::initializer_list<const char*> names, const char** which = nullptr) {
  for (const char* name : names)
    if (const char* value = std::getenv(name); value && *value) {
      if (which) *which = name;
      return value;
    }
  return nullptr;
}

/// `text` with every byte outside printable ASCII replaced by '?': messages and protobuf strings
/// must be text, and environment variables need not be.
std::string printable(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return text;
}

/// A whole decimal number from `low` to `high`, all of `text`; nullopt otherwise.
std::optional<long long> parse_integer(const char* text, long long low, long long high) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < low || value > high)
    return std::nullopt;
  return value;
}

/// A finite number of seconds, all of `text`; nullopt otherwise.
std::optional<double> parse_seconds(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value)) return std::nullopt;
  return value;
}

/// Reads "name[,option=value...]" into config's flush scheduler; why not, or "".
std::string parse_flush_scheduler(const std::string& text, Config& config) {
  size_t at = text.find(',');
  config.flush_scheduler = text.substr(0, at);
  while (at != std::string::npos) {
    const size_t next = text.find(',', at + 1);
    const std::string item = text.substr(at + 1, next - at - 1);
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0)
      return "'" + printable(item) + "' is not option=value";
    config.flush_options[item.substr(0, equals)] = item.substr(equals + 1);
    at = next;
  }
  try {
    (void)core::requests::make_request_scheduler(config.flush_scheduler, config.flush_options);
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

/// Whether `text` is valid UTF-8 with no control character: a protobuf string the daemon accepts.
bool printable_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t extra = c < 0x80           ? 0
                         : (c >> 5) == 0x6  ? 1
                         : (c >> 4) == 0xe  ? 2
                         : (c >> 3) == 0x1e ? 3
                                            : 4;
    if (extra == 4 || c < 0x20 || c == 0x7f || extra >= text.size() - i) return false;
    for (size_t k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
    i += extra + 1;
  }
  return true;
}

/// HARMONIA_PREFETCH's files, collected into env.prefetch (each once, at most kMaxPrefetch), with
/// a note in env.notes for each entry, or part of a directory, that it leaves out.
class PrefetchList {
 public:
  explicit PrefetchList(Environment& env) : env_(env), root_(env.buffer_root) {}

  /// One entry as given (`entry`), resolved against the working directory `cwd`. False once the
  /// list is full.
  bool add_entry(const std::string& entry, const std::string& cwd) {
    const std::string absolute = entry[0] == '/' || cwd.empty() ? entry : cwd + "/" + entry;
    const std::string quoted = std::string(kShown) + ": '" + printable(entry) + "'";
    char resolved[PATH_MAX];
    struct stat64 st {};
    const bool found = realpath(absolute.c_str(), resolved) != nullptr;
    const int error = errno;
    const std::string path = found ? resolved : "";
    const std::string name = buffers::name_beneath(root_, path);
    if (!found) {
      note(quoted +
           (error == ENOENT ? std::string(": no such file")
                            : ": cannot resolve it (" + std::string(std::strerror(error)) + ")") +
           "; not prefetched");
    } else if (name.empty()) {
      note(quoted + " is not beneath HARMONIA_BUFFER_ROOT=" + printable(root_) + "; ignored");
    } else if (storage::real().fstatat64(AT_FDCWD, resolved, &st, 0) != 0) {
      note(quoted + ": cannot stat it (" + std::strerror(errno) + "); not prefetched");
    } else if (S_ISDIR(st.st_mode)) {
      return add_directory(path, quoted);
    } else if (!S_ISREG(st.st_mode)) {
      note(quoted + " is neither a regular file nor a directory; not prefetched");
    } else if (!printable_utf8(name)) {
      note(quoted + ": its name is not printable UTF-8; not prefetched");
    } else {
      return add_file(path, name);
    }
    return true;
  }

 private:
  // No static std::string: the environment is read from a constructor at load.
  static constexpr const char* kShown = "HARMONIA_PREFETCH";
  /// Directory entries one directory entry may look at, in all: a bound on the work at start.
  static constexpr std::size_t kMaxVisited = 1 << 16;
  static constexpr int kMaxDepth = 64;

  void note(std::string text) { env_.notes.push_back(std::move(text)); }

  bool add_file(const std::string& path, const std::string& name) {
    if (std::any_of(env_.prefetch.begin(), env_.prefetch.end(),
                    [&](const PrefetchFile& f) { return f.name == name; }))
      return true;
    if (env_.prefetch.size() == Environment::kMaxPrefetch) {
      note(std::string(kShown) + ": more than " + std::to_string(Environment::kMaxPrefetch) +
           " files; the rest are not prefetched");
      return false;
    }
    env_.prefetch.push_back({path, name});
    return true;
  }

  /// Every regular file beneath `top` (a resolved path beneath the root), in name order;
  /// symbolic links are not followed.
  bool add_directory(const std::string& top, const std::string& quoted) {
    Walk walk;
    const bool room = add_tree(top, 0, walk);
    if (walk.skipped)
      note(quoted + ": " + std::to_string(walk.skipped) +
           " entries beneath it are not regular files with printable UTF-8 names (symbolic "
           "links, devices, sockets, ...) and are not prefetched");
    if (walk.unreadable)
      note(quoted + ": " + std::to_string(walk.unreadable) +
           " directories beneath it cannot be read (or are nested too deep); their files are "
           "not prefetched");
    if (walk.visited > kMaxVisited)
      note(quoted + ": stopped after " + std::to_string(kMaxVisited) +
           " entries; the rest are not prefetched");
    return room;
  }

  struct Walk {
    std::size_t visited = 0, skipped = 0, unreadable = 0;
  };

  bool add_tree(const std::string& dir, int depth, Walk& walk) {
    DIR* stream = depth < kMaxDepth ? opendir(dir.c_str()) : nullptr;
    if (!stream) {
      ++walk.unreadable;
      return true;
    }
    std::vector<std::string> names;
    while (const dirent* entry = readdir(stream)) {
      const std::string child = entry->d_name;
      if (child == "." || child == "..") continue;
      if (++walk.visited > kMaxVisited) break;
      names.push_back(child);
    }
    closedir(stream);
    std::sort(names.begin(), names.end());
    for (const auto& child : names) {
      const std::string path = dir + "/" + child;
      const std::string name = buffers::name_beneath(root_, path);
      struct stat64 st {};
      if (name.empty() ||
          storage::real().fstatat64(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;  // the nodes' own fence directory, or gone meanwhile
      }
      if (S_ISDIR(st.st_mode)) {
        if (!add_tree(path, depth + 1, walk)) return false;
      } else if (!S_ISREG(st.st_mode) || !printable_utf8(name)) {
        ++walk.skipped;
      } else if (!add_file(path, name)) {
        return false;
      }
    }
    return true;
  }

  Environment& env_;
  const std::string& root_;
};

/// Reads HARMONIA_PREFETCH (`text`, comma-separated files and directories) into env.prefetch;
/// what it leaves out goes to env.notes. Relative paths are taken against the working directory
/// now.
void parse_prefetch(const char* text, Environment& env) {
  if (env.buffer_root.empty()) {
    env.notes.emplace_back(
        "HARMONIA_PREFETCH: HARMONIA_BUFFER_ROOT is unset or missing, so no file can be "
        "prefetched; reads go to the file system");
    return;
  }
  std::string cwd;
  if (char here[PATH_MAX]; getcwd(here, sizeof(here))) cwd = here;
  PrefetchList list(env);
  size_t start = 0;
  for (;;) {
    const char* comma = std::strchr(text + start, ',');
    const size_t end = comma ? static_cast<size_t>(comma - text) : std::strlen(text);
    const std::string entry(text + start, end - start);
    start = end + 1;
    if (!entry.empty() && !list.add_entry(entry, cwd)) return;
    if (!comma) return;
  }
}

}  // namespace

bool Config::wants(const std::string& path) const {
  if (!enabled) return false;
  for (const auto& prefix : exclude)
    if (has_prefix(path, prefix)) return false;
  if (include.empty()) return true;
  for (const auto& prefix : include)
    if (has_prefix(path, prefix)) return true;
  return false;
}

std::string check_stage_dir(const std::string& dir) {
  struct stat st {};
  if (dir.empty() || dir[0] != '/') return "must be an absolute path";
  if (stat(dir.c_str(), &st) != 0) return std::string("cannot use it: ") + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "not writable";
  return "";
}

Environment read_environment() {
  Environment env;
  Config& config = env.config;
  for (const char* prefix : kSystemPrefixes) config.exclude.emplace_back(prefix);
  const auto bad = [&](const std::string& name, const char* value, const std::string& expected) {
    env.errors.push_back(name + "=" + printable(value) + ": " + expected);
  };
  if (const char* debug = std::getenv("HARMONIA_DEBUG")) {
    if (std::strcmp(debug, "0") != 0 && std::strcmp(debug, "1") != 0)
      bad("HARMONIA_DEBUG", debug, "must be 0 or 1");
    config.debug = debug[0] == '1';
  }
  if (const char* on = std::getenv("HARMONIA_STAGE")) {
    if (std::strcmp(on, "0") == 0)
      config.enabled = false;
    else if (std::strcmp(on, "1") != 0)
      bad("HARMONIA_STAGE", on, "must be 0 or 1");
  }
  if (const char* dir = std::getenv("HARMONIA_STAGE_DIR"); dir && *dir) {
    if (auto why = check_stage_dir(dir); !why.empty()) {
      bad("HARMONIA_STAGE_DIR", dir, why);
    } else {
      config.stage_dir = dir;
      config.exclude.emplace_back(dir);  // never stage the logs themselves
    }
  }
  if (const char* size = std::getenv("HARMONIA_STAGE_SIZE")) {
    if (const auto parsed = parse_size(size))
      config.file_capacity = *parsed;
    else
      bad("HARMONIA_STAGE_SIZE", size, "expected a positive size such as 64M, 1G or 4096");
  }
  if (const char* size = std::getenv("HARMONIA_SMALL_FILE")) {
    if (const auto parsed =
            std::string_view(size) == "0" ? std::optional<size_t>(0) : parse_size(size);
        parsed && *parsed <= Config::kMaxSmallFile)
      config.small_file = *parsed;
    else
      bad("HARMONIA_SMALL_FILE", size, "expected a size from 0 to 1M, such as 64K");
  }
  if (const char* include = std::getenv("HARMONIA_STAGE_INCLUDE")) {
    config.include = split_paths(include);
    for (const auto& p : config.include)
      if (p[0] != '/')
        env.errors.push_back("HARMONIA_STAGE_INCLUDE: '" + printable(p) +
                             "' is not an absolute path prefix");
  }
  if (const char* exclude = std::getenv("HARMONIA_STAGE_EXCLUDE")) {
    for (auto& p : split_paths(exclude)) {
      if (p[0] != '/')
        env.errors.push_back("HARMONIA_STAGE_EXCLUDE: '" + printable(p) +
                             "' is not an absolute path prefix");
      config.exclude.push_back(std::move(p));
    }
  }
  if (const char* trace = std::getenv("HARMONIA_PHASE_TRACE")) config.phase_trace = trace;
  if (const char* gap = std::getenv("HARMONIA_PHASE_GAP")) {
    const auto seconds = parse_seconds(gap);
    if (seconds && *seconds > 0)
      config.phase_gap = *seconds;
    else
      bad("HARMONIA_PHASE_GAP", gap, "expected seconds > 0, e.g. 0.5");
  }
  if (const char* wait = std::getenv("HARMONIA_NODE_WAIT")) {
    const auto seconds = parse_seconds(wait);
    if (seconds && *seconds >= 0 && *seconds <= 86400)
      config.node_wait = *seconds;
    else
      bad("HARMONIA_NODE_WAIT", wait, "expected seconds from 0 to 86400, e.g. 30");
  }
  if (const char* timeout = std::getenv("HARMONIA_SCHEDD_TIMEOUT")) {
    if (const auto seconds = common::parse_schedd_timeout(timeout))
      config.schedd_timeout = *seconds;
    else
      bad("HARMONIA_SCHEDD_TIMEOUT", timeout, common::kScheddTimeoutExpected);
  }
  if (const char* spec = std::getenv("HARMONIA_FLUSH_SCHEDULER"); spec && *spec) {
    if (auto why = parse_flush_scheduler(spec, config); !why.empty())
      bad("HARMONIA_FLUSH_SCHEDULER", spec, why);
  }

  if (const char* schedd = first_env({"HARMONIA_SCHEDD"})) env.schedd = schedd;
  if (const char* root = first_env({"HARMONIA_BUFFER_ROOT"})) {
    char resolved[PATH_MAX];
    if (realpath(root, resolved)) env.buffer_root = resolved;
  }
  if (const char* root = first_env({"HARMONIA_PFS_ROOT"})) env.pfs_root = root;
  if (const char* prefetch = first_env({"HARMONIA_PREFETCH"})) parse_prefetch(prefetch, env);

  Identity& id = env.identity;
  if (const char* job = first_env({"HARMONIA_JOB"})) {
    id.job = job;
  } else if (const char* slurm = first_env({"SLURM_JOB_ID"})) {
    id.job = std::string("slurm-") + slurm;
    if (const char* step = first_env({"SLURM_STEP_ID"})) id.job += std::string(".") + step;
  } else if (const char* mpi = first_env({"PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid"})) {
    id.mpi_job = mpi;
  }
  if (const char* name = first_env({"HARMONIA_JOB_NAME", "SLURM_JOB_NAME"})) id.name = name;
  const auto whole_number = [&](std::initializer_list<const char*> names, std::uint32_t& field) {
    const char* name = nullptr;
    const char* text = first_env(names, &name);
    if (!text) return;
    if (const auto value = parse_integer(text, 0, UINT32_MAX))
      field = static_cast<std::uint32_t>(*value);
    else
      bad(name, text, "expected a whole number");
  };
  whole_number({"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, id.rank);
  whole_number({"SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, id.ranks);
  if (const char* priority = first_env({"HARMONIA_PRIORITY"})) {
    if (const auto value = parse_integer(priority, -1000000, 1000000))
      id.priority = static_cast<std::int32_t>(*value);
    else
      bad("HARMONIA_PRIORITY", priority, "expected an integer from -1000000 to 1000000");
  }
  if (const char* bytes = first_env({"HARMONIA_BYTES_PER_PROCESS"})) {
    char* end = nullptr;
    const double number = std::strtod(bytes, &end);
    if (end != bytes && *end == '\0' && std::isfinite(number) && number >= 0)
      id.bytes_per_process = number;
    else if (const auto parsed = parse_size(bytes))
      id.bytes_per_process = static_cast<double>(*parsed);
    else
      bad("HARMONIA_BYTES_PER_PROCESS", bytes, "expected bytes (48e6, 4096) or a size (64M, 1G)");
  }
  if (const char* hint = first_env({"HARMONIA_HINT"})) {
    id.cached = std::strcmp(hint, "cached") == 0;
    if (!id.cached && std::strcmp(hint, "flushable") != 0)
      bad("HARMONIA_HINT", hint, "expected flushable or cached");
  }
  if (const char* io_qos = first_env({"HARMONIA_IO_QOS"})) id.io_qos = printable(io_qos);
  if (!env.errors.empty()) config.enabled = false;
  return env;
}

const Environment& environment() {
  // Read at the first call, from whichever wrapper comes first: the program's errno stays as
  // it was (resolving paths sets it), since that call may succeed without setting it.
  static const Environment* env = [] {
    const int program_errno = errno;
    auto* read = new Environment(read_environment());  // never destroyed: used until exit
    for (const auto& error : read->errors)
      report(error + "; staging disabled, writes go straight to their files");
    for (const auto& note : read->notes) report(note);
    errno = program_errno;
    return read;
  }();
  return *env;
}

}  // namespace harmonia::bbio
