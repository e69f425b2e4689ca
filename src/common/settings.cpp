#include "common/settings.hpp"

#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/size.hpp"

#ifndef HARMONIA_SYSCONFDIR
#define HARMONIA_SYSCONFDIR "/etc"
#endif

namespace harmonia::common {

namespace {

std::string shortest(double value) {
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  return std::string(text, end);
}

/// Bytes as the largest binary unit that divides them (256M, 1G), else as a number.
std::string size_text(double bytes) {
  if (bytes <= 0 || bytes != std::floor(bytes) || bytes >= 0x1p62) return shortest(bytes);
  const auto whole = static_cast<std::uint64_t>(bytes);
  for (const auto& [unit, shift] : {std::pair{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}})
    if (whole % (1ULL << shift) == 0) return std::to_string(whole >> shift) + unit;
  return std::to_string(whole);
}

std::string range_text(double min, double max, bool sizes) {
  const auto show = [sizes](double v) { return sizes ? size_text(v) : shortest(v); };
  if (max >= 0x1p62) return "at least " + show(min);
  return "from " + show(min) + " to " + show(max);
}

std::optional<long long> whole_number(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::optional<double> real_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value))
    return std::nullopt;
  return value;
}

template <class Int>
SettingValue integer_value(Int& target, long long min, long long max) {
  SettingValue v;
  v.type = "integer";
  v.default_text = std::to_string(target);
  v.min = static_cast<double>(min);
  v.max = static_cast<double>(max);
  v.file_string = false;
  v.file_number = true;
  v.assign = [&target, min, max](const std::string& text) -> std::string {
    const auto value = whole_number(text);
    if (!value) return "expected a whole number, got \"" + text + "\"";
    if (*value < min || *value > max)
      return "must be from " + std::to_string(min) + " to " + std::to_string(max) + ", got " + text;
    target = static_cast<Int>(*value);
    return "";
  };
  return v;
}

template <class Bytes>
SettingValue size_value(Bytes& target, double min, double max, std::string unit) {
  SettingValue v;
  v.type = "size";
  v.default_text = size_text(static_cast<double>(target));
  v.min = min;
  v.max = max;
  v.unit = std::move(unit);
  v.file_number = true;
  v.assign = [&target, min, max](const std::string& text) -> std::string {
    std::optional<size_t> bytes;
    const auto first = text.find_first_not_of(" \t");
    if (first != std::string::npos && text.find_first_not_of("0", first) == text.size())
      bytes = 0;  // parse_size refuses zero bytes; a bound of 0 may mean "none"
    else
      bytes = parse_size(text);
    if (!bytes) return "expected a size such as 4096, 64M or \"1 GiB\", got \"" + text + "\"";
    const auto value = static_cast<double>(*bytes);
    if (value < min || value > max)
      return "must be " + range_text(min, max, true) + ", got " + text;
    target = static_cast<Bytes>(*bytes);
    return "";
  };
  return v;
}

/// What the site file must hold for a setting, for its errors.
std::string expected_in_file(const SettingValue& v) {
  if (v.file_boolean) return "true or false";
  if (v.file_number && v.file_string)
    return "a size (a number of bytes, or a string such as \"64M\")";
  if (v.file_number) return "a number";
  return "a string";
}

std::string kind_of(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "a list";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

/// One TOML value as the text a setting's assign reads; "" and `why` when of the wrong kind.
std::optional<std::string> file_text(const toml::node& node, const SettingValue& v,
                                     std::string& why) {
  if (const auto* s = node.as_string(); s && v.file_string) return s->get();
  if (const auto* i = node.as_integer(); i && v.file_number) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point(); f && v.file_number) return shortest(f->get());
  if (const auto* b = node.as_boolean(); b && v.file_boolean)
    return std::string(b->get() ? "true" : "false");
  why = "expected " + expected_in_file(v) + ", got " + kind_of(node);
  return std::nullopt;
}

/// A value as the site file would hold it: numbers and booleans bare, the rest quoted.
std::string toml_text(const SettingValue& v, const std::string& text) {
  const bool bare = (v.file_boolean && (text == "true" || text == "false")) ||
                    (v.file_number && real_number(text));
  return bare ? text : quote(text);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

}  // namespace

SettingValue text(std::string& target) {
  SettingValue v;
  v.type = "string";
  v.default_text = target;
  v.assign = [&target](const std::string& value) {
    target = value;
    return std::string();
  };
  return v;
}

SettingValue choice(std::string& target, std::vector<std::string> choices) {
  SettingValue v;
  v.type = "choice";
  v.default_text = target;
  v.choices = choices;
  v.assign = [&target, choices](const std::string& value) -> std::string {
    if (choices.empty() ||  // names this program does not know: checked where they are used
        std::find(choices.begin(), choices.end(), value) != choices.end()) {
      target = value;
      return "";
    }
    std::string known;
    for (const auto& name : choices) known += (known.empty() ? "" : ", ") + name;
    return "expected one of " + known + ", got \"" + value + "\"";
  };
  return v;
}

SettingValue integer(int& target, long long min, long long max) {
  return integer_value(target, min, max);
}

SettingValue integer(unsigned& target, long long min, long long max) {
  return integer_value(target, min, max);
}

SettingValue optional_integer(std::optional<int>& target, long long min, long long max,
                              std::string unset_means) {
  static int scratch;  // only for the shape: assign below writes the optional
  SettingValue v = integer_value(scratch, min, max);
  v.default_text = "";
  v.unit = std::move(unset_means);
  auto check = v.assign;
  v.assign = [&target, check](const std::string& text) -> std::string {
    std::string why = check(text);
    if (why.empty()) target = static_cast<int>(*whole_number(text));
    return why;
  };
  return v;
}

SettingValue number(double& target, double min, double max, std::string unit) {
  SettingValue v;
  v.type = "number";
  v.default_text = shortest(target);
  v.min = min;
  v.max = max;
  v.unit = std::move(unit);
  v.file_string = false;
  v.file_number = true;
  v.assign = [&target, min, max](const std::string& text) -> std::string {
    const auto value = real_number(text);
    if (!value) return "expected a number, got \"" + text + "\"";
    if (*value < min || *value > max)
      return "must be " + range_text(min, max, false) + ", got " + text;
    target = *value;
    return "";
  };
  return v;
}

SettingValue size(double& target, double min, double max, std::string unit) {
  return size_value(target, min, max, std::move(unit));
}

SettingValue size(std::uint64_t& target, double min, double max, std::string unit) {
  return size_value(target, min, max, std::move(unit));
}

SettingValue flag(bool& target) {
  SettingValue v;
  v.type = "flag";
  v.default_text = target ? "true" : "false";
  v.file_string = false;
  v.file_boolean = true;
  v.assign = [&target](const std::string& text) -> std::string {
    for (const char* yes : {"true", "1", "yes", "on"})
      if (text == yes) return target = true, "";
    for (const char* no : {"false", "0", "no", "off"})
      if (text == no) return target = false, "";
    return "expected true or false, got \"" + text + "\"";
  };
  return v;
}

SettingValue uids(std::vector<uid_t>& target) {
  SettingValue v;
  v.type = "list";
  v.repeatable = true;
  v.min = 0;
  v.max = 4294967294.0;  // (uid_t)-1 means "no user" to the kernel
  v.file_string = false;
  v.file_number = true;
  v.default_text = "";
  for (const uid_t uid : target)
    v.default_text += (v.default_text.empty() ? "" : ",") + std::to_string(uid);
  v.clear = [&target] { target.clear(); };
  v.assign = [&target](const std::string& text) -> std::string {
    const auto value = whole_number(text);
    if (!value || *value < 0 || *value > 4294967294LL)
      return "expected a user id from 0 to 4294967294, got \"" + text + "\"";
    target.push_back(static_cast<uid_t>(*value));
    return "";
  };
  return v;
}

SettingValue texts(std::vector<std::string>& target,
                   std::function<std::string(const std::string&)> check) {
  SettingValue v;
  v.type = "list";
  v.repeatable = true;
  v.default_text = "";
  for (const auto& item : target) v.default_text += (v.default_text.empty() ? "" : ",") + item;
  v.clear = [&target] { target.clear(); };
  v.assign = [&target, check](const std::string& text) -> std::string {
    std::string why = check(text);
    if (why.empty()) target.push_back(text);
    return why;
  };
  return v;
}

std::string Setting::environment() const {
  std::string name = "HARMONIA_";
  for (const char c : key)
    name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void Settings::add(std::string key, std::string flag, unsigned daemons, SettingValue value,
                   std::string help) {
  settings_.push_back(
      Setting{std::move(key), std::move(flag), daemons, std::move(value), std::move(help)});
  given_.emplace_back();
  flag_given_.push_back(0);
  source_.push_back(Source::Default);
  shown_.push_back(settings_.back().value.default_text);
}

std::string Settings::default_config_path() {
  if (const char* named = std::getenv("HARMONIA_CONFIG"); named && *named) return named;
  return HARMONIA_SYSCONFDIR "/harmonia/harmonia.toml";
}

void Settings::add_options(CLI::App& cli, Daemon daemon) {
  cli.add_option("--config", path_,
                 "Site file (TOML; default: $HARMONIA_CONFIG, else " HARMONIA_SYSCONFDIR
                 "/harmonia/harmonia.toml when it exists). The command line wins over the "
                 "environment (HARMONIA_TABLE_KEY), which wins over the file")
      ->each([this](const std::string&) { path_given_ = true; });
  cli.add_flag("--show-config", show_,
               "Print every setting as the site file would hold it, with where its value came "
               "from, and exit");
  for (std::size_t k = 0; k < settings_.size(); ++k) {
    const Setting& s = settings_[k];
    if (!(s.daemons & daemon) || s.flag.empty()) continue;
    std::string help = s.help;
    if (s.value.type == "optional" ||
        (s.value.default_text.empty() && !s.value.unit.empty() && s.value.type == "integer"))
      help += " (default: " + s.value.unit + ")";
    else if (!s.value.default_text.empty())
      help += " (default: " + s.value.default_text + ")";
    help += " [" + s.key + ", " + s.environment() + "]";
    if (s.value.type == "flag") {
      cli.add_flag_callback(
          s.flag, [this, k] { flag_given_[k] = 1; }, help);
      continue;
    }
    auto* option = cli.add_option(s.flag, given_[k], help);
    if (s.value.repeatable)
      option->type_size(1)->expected(1, CLI::detail::expected_max_vector_size);
    else
      option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    std::string type = s.value.type == "choice" ? "" : s.value.type;
    for (const auto& c : s.value.choices) type += (type.empty() ? "" : "|") + c;
    if (!s.value.unit.empty() && s.value.type != "integer") type = s.value.unit;
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    option->type_name(type);
  }
}

void Settings::assign(std::size_t k, const std::vector<std::string>& values,
                      const std::string& where, Source source, std::vector<std::string>& errors) {
  Setting& s = settings_[k];
  if (!s.value.repeatable && values.size() != 1) {
    errors.push_back(where + ": expected one value, got " + std::to_string(values.size()));
    return;
  }
  if (s.value.clear) s.value.clear();
  std::string shown;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::string why = s.value.assign(values[i]);
    if (!why.empty()) {
      const bool listed = source == Source::File && s.value.repeatable;
      errors.push_back(where + (listed ? "[" + std::to_string(i) + "]" : "") + ": " + why);
    }
    shown += (i ? ", " : "") + toml_text(s.value, values[i]);
  }
  source_[k] = source;
  shown_[k] = s.value.repeatable ? "[" + shown + "]" : shown;
}

void Settings::read_file(std::vector<std::optional<std::vector<std::string>>>& found,
                         std::vector<std::string>& errors) const {
  {
    std::ifstream probe(path_);
    if (!probe) {
      errors.push_back(path_ + ": cannot read the site file: " + std::strerror(errno));
      return;
    }
  }
  toml::table file;
  try {
    file = toml::parse_file(path_);
  } catch (const toml::parse_error& error) {
    const auto& at = error.source().begin;
    errors.push_back(path_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                     ": " + std::string(error.description()));
    return;
  }
  for (auto&& [table_name, table_node] : file) {
    const std::string table(table_name.str());
    const auto* entries = table_node.as_table();
    if (!entries) {
      errors.push_back(path_ + ": " + table +
                       ": not a table (settings are written in tables "
                       "such as [schedd] and [bbd])");
      continue;
    }
    for (auto&& [name, node] : *entries) {
      const std::string key = table + "." + std::string(name.str());
      const auto it = std::find_if(settings_.begin(), settings_.end(),
                                   [&](const Setting& s) { return s.key == key; });
      if (it == settings_.end()) {
        std::string known;
        for (const auto& s : settings_)
          if (s.key.rfind(table + ".", 0) == 0)
            known += (known.empty() ? "" : ", ") + s.key.substr(table.size() + 1);
        errors.push_back(path_ + ": " + key + ": unknown setting" +
                         (known.empty() ? " (and no table [" + table + "])"
                                        : " (known in [" + table + "]: " + known + ")"));
        continue;
      }
      const auto k = static_cast<std::size_t>(it - settings_.begin());
      std::vector<std::string> values;
      std::string why;
      if (const auto* list = node.as_array()) {
        if (!it->value.repeatable) {
          errors.push_back(path_ + ": " + key + ": expected " + expected_in_file(it->value) +
                           ", got a list");
          continue;
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
          const auto value = file_text(*list->get(i), it->value, why);
          if (!value)
            errors.push_back(path_ + ": " + key + "[" + std::to_string(i) + "]: " + why);
          else
            values.push_back(*value);
        }
        if (values.size() != list->size()) continue;
      } else {
        const auto value = file_text(node, it->value, why);
        if (!value) {
          errors.push_back(path_ + ": " + key + ": " + why);
          continue;
        }
        values.push_back(*value);
      }
      found[k] = std::move(values);
    }
  }
}

std::vector<std::string> Settings::apply(Daemon daemon) {
  std::vector<std::string> errors;
  if (!path_given_) {
    const char* named = std::getenv("HARMONIA_CONFIG");
    path_given_ = named && *named;
    path_ = default_config_path();
    if (!path_given_ && access(path_.c_str(), F_OK) != 0) path_.clear();  // no site file
  }
  std::vector<std::optional<std::vector<std::string>>> from_file(settings_.size());
  if (!path_.empty()) read_file(from_file, errors);
  for (std::size_t k = 0; k < settings_.size(); ++k) {
    const Setting& s = settings_[k];
    if (from_file[k]) assign(k, *from_file[k], path_ + ": " + s.key, Source::File, errors);
    if (!(s.daemons & daemon)) continue;
    const std::string variable = s.environment();
    if (const char* value = std::getenv(variable.c_str())) {
      const std::vector<std::string> values =
          s.value.repeatable ? split_commas(value) : std::vector<std::string>{value};
      assign(k, values, variable + "=" + value, Source::Environment, errors);
    }
    if (flag_given_[k]) assign(k, {"true"}, s.flag, Source::CommandLine, errors);
    if (!given_[k].empty()) {
      std::string joined;
      for (const auto& text : given_[k]) joined += (joined.empty() ? "" : " ") + text;
      assign(k, given_[k], s.flag + " " + joined, Source::CommandLine, errors);
    }
  }
  return errors;
}

std::string Settings::show(Daemon daemon) const {
  std::ostringstream out;
  out << "# " << (path_.empty() ? "no site file" : "site file " + path_) << "\n";
  std::string table;
  for (std::size_t k = 0; k < settings_.size(); ++k) {
    const Setting& s = settings_[k];
    if (!(s.daemons & daemon)) continue;
    const auto dot = s.key.find('.');
    if (s.key.substr(0, dot) != table) {
      table = s.key.substr(0, dot);
      out << "\n[" << table << "]\n";
    }
    static const char* const from[] = {"default", "site file", "environment", "command line"};
    std::string value = shown_[k];
    if (source_[k] == Source::Default) {
      const auto& v = s.value;
      if (v.repeatable) {
        std::string items;
        for (const auto& item : split_commas(v.default_text))
          items += (items.empty() ? "" : ", ") + toml_text(v, item);
        value = "[" + items + "]";
      } else if (v.default_text.empty() && v.type == "integer") {
        out << "# " << s.key.substr(dot + 1) << " unset: " << v.unit << "\n";
        continue;
      } else {
        value = toml_text(v, v.default_text);
      }
    }
    out << s.key.substr(dot + 1) << " = " << value << "  # " << from[static_cast<int>(source_[k])]
        << "\n";
  }
  return out.str();
}

}  // namespace harmonia::common
