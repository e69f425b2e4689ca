#pragma once
/// @file The daemons' log: to stderr by default (under systemd the journal keeps it, with each
/// line's priority), to syslog, or as JSON lines; with levels, and the job, user and node a line
/// is about as fields of their own.

#include <sys/types.h>

#include <optional>
#include <string>

namespace harmonia::common::log {

enum class Level { Debug, Info, Warning, Error };

/// What a line is about; every refusal and failure names what it knows of these.
struct Subject {
  std::string job;
  std::optional<uid_t> uid;
  std::string node;
};

/// Sets the program's name and where lines go: `target` stderr, syslog or json; lines below
/// `level` (debug, info, warning, error) are dropped. With syslog or json, whatever else the
/// process writes to stderr (libraries, code that prints) becomes log lines too, at level
/// warning. Throws std::invalid_argument naming a bad target or level.
void configure(const std::string& program, const std::string& target, const std::string& level);

/// Logs `message` about `subject`. Thread-safe.
void write(Level level, const std::string& message, const Subject& subject = {});

inline void info(const std::string& message, const Subject& subject = {}) {
  write(Level::Info, message, subject);
}
inline void warning(const std::string& message, const Subject& subject = {}) {
  write(Level::Warning, message, subject);
}
inline void error(const std::string& message, const Subject& subject = {}) {
  write(Level::Error, message, subject);
}

/// " (job J, uid U, node N)" for what `subject` names, "" when nothing: the stderr form.
std::string describe(const Subject& subject);

}  // namespace harmonia::common::log
