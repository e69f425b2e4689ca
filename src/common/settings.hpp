#pragma once
/// @file Settings declared once, read from three places.
///
/// Each setting of a daemon is declared once (`Settings::add`): its key in the site file
/// (`schedd.tick` is `tick` in `[schedd]`), its command-line flag, its type, default, range and
/// help. From that one declaration come the daemon's options, its environment variable
/// (`HARMONIA_SCHEDD_TICK`), the checks of every value, `harmonia-describe --settings` and the
/// table in docs/configuration.md. A value given on the command line wins over the environment,
/// which wins over the file (`--config`, else `HARMONIA_CONFIG`, else the installed default).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace harmonia::common {

/// Which daemons read a setting (a mask: a site file serves both).
enum Daemon : unsigned { kSchedd = 1, kNode = 2, kBothDaemons = 3 };

/// The type, default and range of a setting, and how a text becomes its value.
struct SettingValue {
  /// "string", "choice", "integer", "number", "size", "flag" or "list".
  std::string type;
  std::string default_text;  ///< as it would be written in the file ("" when none)
  std::optional<double> min, max;
  std::vector<std::string> choices;
  std::string unit;         ///< "seconds", "bytes", "bytes/s", or ""
  bool repeatable = false;  ///< a list: the flag may be given more than once
  /// What the site file may hold: a TOML string, number (integer or float), boolean.
  bool file_string = true, file_number = false, file_boolean = false;
  /// Checks one text (one element of a list) and stores it; "" or why it is refused.
  std::function<std::string(const std::string&)> assign;
  /// A list: empties it, before the elements of the source that wins are assigned.
  std::function<void()> clear;
};

/// Free text (a path, an address).
SettingValue text(std::string& target);
/// One of `choices` (any text when there are none: names this program cannot check).
SettingValue choice(std::string& target, std::vector<std::string> choices);
/// A whole number from `min` to `max`.
SettingValue integer(int& target, long long min, long long max);
SettingValue integer(unsigned& target, long long min, long long max);
/// A whole number from `min` to `max`, or unset (its default is the code's own, `unset_means`).
SettingValue optional_integer(std::optional<int>& target, long long min, long long max,
                              std::string unset_means);
/// A number from `min` to `max` (`unit`: what it counts, for the help).
SettingValue number(double& target, double min, double max, std::string unit);
/// A size in bytes ("64M", "1 GiB", 4096) from `min` to `max`; `unit` "bytes" or "bytes/s".
SettingValue size(double& target, double min, double max, std::string unit = "bytes");
SettingValue size(std::uint64_t& target, double min, double max, std::string unit = "bytes");
/// true or false (a flag on the command line; 1/0, true/false, yes/no in the environment).
SettingValue flag(bool& target);
/// User ids (repeatable).
SettingValue uids(std::vector<uid_t>& target);
/// Texts, each checked by `check` ("" or why not) (repeatable).
SettingValue texts(std::vector<std::string>& target,
                   std::function<std::string(const std::string&)> check);

/// One declared setting.
struct Setting {
  std::string key;   ///< "table.name" in the site file
  std::string flag;  ///< "--name" on the daemons' command lines ("" when none)
  unsigned daemons = kBothDaemons;
  SettingValue value;
  std::string help;
  /// HARMONIA_ and the key in capitals, dots as underscores (HARMONIA_SCHEDD_TICK).
  std::string environment() const;
};

/// Where a setting's value came from.
enum class Source { Default, File, Environment, CommandLine };

class Settings {
 public:
  /// Declares a setting; its current target value is its default (SettingValue::default_text).
  void add(std::string key, std::string flag, unsigned daemons, SettingValue value,
           std::string help);
  const std::vector<Setting>& all() const { return settings_; }

  /// Adds the options of `daemon`'s settings to `cli`, and --config and --show-config.
  void add_options(CLI::App& cli, Daemon daemon);
  /// After `cli` parsed the command line: applies the site file, then the environment, then
  /// the command line, to `daemon`'s settings. Every value found is checked, every daemon's
  /// setting in the file included (one file serves both daemons), and every key of the file
  /// must be declared. Returns the errors, one line each, naming the file and key, the variable
  /// or the flag, and the reason; empty when the daemon may start.
  std::vector<std::string> apply(Daemon daemon);
  /// --show-config was given: print `show()` and exit.
  bool show_requested() const { return show_; }
  /// The settings of `daemon` as a site file would hold them, each with where its value came
  /// from; only valid after apply.
  std::string show(Daemon daemon) const;
  /// The site file read ("" when none).
  const std::string& config_path() const { return path_; }

  /// The site file read when none is named: `HARMONIA_CONFIG`, else the installed default.
  static std::string default_config_path();

 private:
  /// Applies a source's texts to setting `k`; appends the errors, named by `where`.
  void assign(std::size_t k, const std::vector<std::string>& texts, const std::string& where,
              Source source, std::vector<std::string>& errors);
  /// Reads the site file into `texts` (per setting); appends its errors.
  void read_file(std::vector<std::optional<std::vector<std::string>>>& texts,
                 std::vector<std::string>& errors) const;

  std::vector<Setting> settings_;
  std::vector<std::vector<std::string>> given_;  ///< from the command line, per setting
  std::vector<char> flag_given_;                 ///< flags given on the command line
  std::vector<Source> source_;
  std::vector<std::string> shown_;  ///< the value that won, as text
  std::string path_;
  bool path_given_ = false;
  bool show_ = false;
};

/// One text per element of a TOML-like list written by `Settings::show`.
std::string quote(const std::string& text);

}  // namespace harmonia::common
