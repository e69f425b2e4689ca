#include "common/log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace harmonia::common::log {

namespace {

enum class Target { Stderr, Syslog, Json };

struct State {
  std::mutex mutex;
  std::string program = "harmonia";
  Target target = Target::Stderr;
  Level least = Level::Info;
  int out = STDERR_FILENO;  ///< where stderr and json lines go (the original stderr)
  bool journal = false;     ///< `out` is the journal's stream: lines carry their priority
};

State& state() {
  static State instance;
  return instance;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Debug:
      return "debug";
    case Level::Info:
      return "info";
    case Level::Warning:
      return "warning";
    case Level::Error:
      return "error";
  }
  return "info";
}

int priority(Level level) {
  switch (level) {
    case Level::Debug:
      return LOG_DEBUG;
    case Level::Info:
      return LOG_INFO;
    case Level::Warning:
      return LOG_WARNING;
    case Level::Error:
      return LOG_ERR;
  }
  return LOG_INFO;
}

/// Whether `fd` is the journal stream systemd connected (JOURNAL_STREAM names its device and
/// inode): then a "<N>" before a line gives the journal its priority.
bool is_journal(int fd) {
  const char* stream = std::getenv("JOURNAL_STREAM");
  struct stat st {};
  if (!stream || fstat(fd, &st) != 0) return false;
  unsigned long long device = 0, inode = 0;
  return std::sscanf(stream, "%llu:%llu", &device, &inode) == 2 && device == st.st_dev &&
         inode == st.st_ino;
}

void write_all(int fd, const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log to: nothing else to do
    done += static_cast<std::size_t>(n);
  }
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[80];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", parts.tm_year + 1900,
                parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec,
                static_cast<long long>(millis));
  return text;
}

/// Turns what the process writes to stderr into log lines: fd 2 becomes a pipe read here.
void capture_stderr(State& s) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return;  // lines then go to stderr as they are
  s.out = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (s.out < 0 || dup2(ends[1], STDERR_FILENO) < 0) {
    s.out = STDERR_FILENO;
    close(ends[0]);
    close(ends[1]);
    return;
  }
  close(ends[1]);
  std::thread([reader = ends[0]] {
    std::string pending;
    char chunk[4096];
    for (;;) {
      const ssize_t n = read(reader, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      pending.append(chunk, static_cast<std::size_t>(n));
      for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
        std::string line = pending.substr(0, end);
        pending.erase(0, end + 1);
        const std::string prefix = state().program + ": ";
        if (line.rfind(prefix, 0) == 0) line.erase(0, prefix.size());
        if (!line.empty()) write(Level::Warning, line);
      }
    }
  }).detach();
}

}  // namespace

void configure(const std::string& program, const std::string& target, const std::string& level) {
  State& s = state();
  static const std::map<std::string, Target> targets = {
      {"stderr", Target::Stderr}, {"syslog", Target::Syslog}, {"json", Target::Json}};
  static const std::map<std::string, Level> levels = {{"debug", Level::Debug},
                                                      {"info", Level::Info},
                                                      {"warning", Level::Warning},
                                                      {"error", Level::Error}};
  const auto target_found = targets.find(target);
  if (target_found == targets.end())
    throw std::invalid_argument("log target " + target + ": expected stderr, syslog or json");
  const auto level_found = levels.find(level);
  if (level_found == levels.end())
    throw std::invalid_argument("log level " + level + ": expected debug, info, warning or error");
  const Target chosen = target_found->second;
  const Level least = level_found->second;
  {
    std::lock_guard lock(s.mutex);
    s.program = program;
    s.target = chosen;
    s.least = least;
    s.journal = is_journal(STDERR_FILENO);
  }
  if (chosen == Target::Syslog) openlog(s.program.c_str(), LOG_PID, LOG_DAEMON);
  if (chosen != Target::Stderr) capture_stderr(s);
}

std::string describe(const Subject& subject) {
  std::string parts;
  const auto add = [&parts](const std::string& part) {
    parts += (parts.empty() ? "" : ", ") + part;
  };
  if (!subject.job.empty()) add("job " + subject.job);
  if (subject.uid) add("uid " + std::to_string(*subject.uid));
  if (!subject.node.empty()) add("node " + subject.node);
  return parts.empty() ? "" : " (" + parts + ")";
}

void write(Level level, const std::string& message, const Subject& subject) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (level < s.least) return;
  switch (s.target) {
    case Target::Stderr: {
      const std::string mark = s.journal ? "<" + std::to_string(priority(level)) + ">" : "";
      write_all(s.out, mark + s.program + ": " + message + describe(subject) + "\n");
      break;
    }
    case Target::Syslog:
      syslog(priority(level), "%s%s", message.c_str(), describe(subject).c_str());
      break;
    case Target::Json: {
      nlohmann::ordered_json line = {{"time", utc_now()},
                                     {"level", level_name(level)},
                                     {"program", s.program},
                                     {"pid", getpid()},
                                     {"message", message}};
      if (!subject.job.empty()) line["job"] = subject.job;
      if (subject.uid) line["uid"] = *subject.uid;
      if (!subject.node.empty()) line["node"] = subject.node;
      write_all(s.out, line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      break;
    }
  }
}

}  // namespace harmonia::common::log
