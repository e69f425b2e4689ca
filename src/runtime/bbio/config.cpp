#include "runtime/bbio/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/requests/registry.hpp"

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

Config config_from_environment(std::string& error) {
  Config config;
  for (const char* prefix : kSystemPrefixes) config.exclude.emplace_back(prefix);
  const auto fail = [&](const std::string& message) {
    error = message;
    config.enabled = false;
    return config;
  };
  if (const char* debug = std::getenv("HARMONIA_DEBUG")) {
    if (std::strcmp(debug, "0") != 0 && std::strcmp(debug, "1") != 0)
      return fail(std::string("HARMONIA_DEBUG=") + debug + ": must be 0 or 1");
    config.debug = debug[0] == '1';
  }
  if (const char* on = std::getenv("HARMONIA_STAGE")) {
    if (std::strcmp(on, "0") == 0)
      config.enabled = false;
    else if (std::strcmp(on, "1") != 0)
      return fail(std::string("HARMONIA_STAGE=") + on + ": must be 0 or 1");
  }
  if (const char* dir = std::getenv("HARMONIA_STAGE_DIR"); dir && *dir) {
    if (auto why = check_stage_dir(dir); !why.empty())
      return fail(std::string("HARMONIA_STAGE_DIR=") + dir + ": " + why);
    config.stage_dir = dir;
    config.exclude.emplace_back(dir);  // never stage the logs themselves
  }
  if (const char* size = std::getenv("HARMONIA_STAGE_SIZE")) {
    const auto parsed = parse_size(size);
    if (!parsed)
      return fail(std::string("HARMONIA_STAGE_SIZE=") + size +
                  ": expected a positive size such as 64M, 1G or 4096");
    config.file_capacity = *parsed;
  }
  if (const char* include = std::getenv("HARMONIA_STAGE_INCLUDE")) {
    config.include = split_paths(include);
    for (const auto& p : config.include)
      if (p[0] != '/')
        return fail("HARMONIA_STAGE_INCLUDE: '" + p + "' is not an absolute path prefix");
  }
  if (const char* exclude = std::getenv("HARMONIA_STAGE_EXCLUDE")) {
    for (auto& p : split_paths(exclude)) {
      if (p[0] != '/')
        return fail("HARMONIA_STAGE_EXCLUDE: '" + p + "' is not an absolute path prefix");
      config.exclude.push_back(std::move(p));
    }
  }
  if (const char* trace = std::getenv("HARMONIA_PHASE_TRACE")) config.phase_trace = trace;
  if (const char* gap = std::getenv("HARMONIA_PHASE_GAP")) {
    char* end = nullptr;
    config.phase_gap = std::strtod(gap, &end);
    if (end == gap || *end != '\0' || !(config.phase_gap > 0))
      return fail(std::string("HARMONIA_PHASE_GAP=") + gap + ": expected seconds > 0, e.g. 0.5");
  }
  if (const char* wait = std::getenv("HARMONIA_NODE_WAIT")) {
    char* end = nullptr;
    config.node_wait = std::strtod(wait, &end);
    if (end == wait || *end != '\0' || !(config.node_wait >= 0 && config.node_wait <= 86400))
      return fail(std::string("HARMONIA_NODE_WAIT=") + wait +
                  ": expected seconds from 0 to 86400, e.g. 30");
  }
  if (const char* spec = std::getenv("HARMONIA_FLUSH_SCHEDULER"); spec && *spec) {
    std::string text = spec;
    size_t at = text.find(',');
    config.flush_scheduler = text.substr(0, at);
    while (at != std::string::npos) {
      const size_t next = text.find(',', at + 1);
      const std::string item = text.substr(at + 1, next - at - 1);
      const size_t equals = item.find('=');
      if (equals == std::string::npos || equals == 0)
        return fail(std::string("HARMONIA_FLUSH_SCHEDULER=") + spec + ": '" + item +
                    "' is not option=value");
      config.flush_options[item.substr(0, equals)] = item.substr(equals + 1);
      at = next;
    }
    try {
      (void)core::requests::make_request_scheduler(config.flush_scheduler, config.flush_options);
    } catch (const std::exception& error) {
      return fail(std::string("HARMONIA_FLUSH_SCHEDULER=") + spec + ": " + error.what());
    }
  }
  return config;
}

}  // namespace harmonia::bbio
