#pragma once
/// @file The one strict reader of the simulators' normalized JSON. Every error names the key's
/// full path ("apps[2].phases[0].size: must be > 0.000000"), numbers must be finite, and a key
/// that no part of the program reads is an error too: a misspelt optional key would otherwise be
/// ignored without a word.

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace harmonia::simkit {

/// Bad input: the message starts with the key path (or the file, from load_json).
class InputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Parses JSON text; errors start with `source`.
nlohmann::json parse_json(const std::string& text, const std::string& source);
/// Reads and parses a file; errors start with its path.
nlohmann::json load_json(const std::string& path);
/// Reads the file at `path` and turns it into a value with `parse`; every InputError starts with
/// the path.
template <class Parse>
auto load_with(const std::string& path, Parse parse) -> decltype(parse(nlohmann::json()));

class Reader;

/// One parsed document and the keys its readers asked for. Outlives its readers.
class Document {
 public:
  explicit Document(const nlohmann::json& root) : root_(root) {}
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  /// The top-level object; throws unless the document is one.
  Reader root() const;
  /// Throws InputError for the first key (in read order of the objects, then by name) of an
  /// object opened with a Reader that nothing read or skipped.
  void check_all_read() const;

 private:
  friend class Reader;
  struct Seen {
    std::string path;
    std::set<std::string> read;
  };
  Seen& seen(const nlohmann::json& object, const std::string& path) const;

  const nlohmann::json& root_;
  mutable std::vector<Seen> objects_;  // in the order they were opened
  mutable std::map<const nlohmann::json*, size_t> index_;
};

/// Reads the keys of one JSON object; every key read is marked on the document.
class Reader {
 public:
  /// The value of `key` ("missing" if absent).
  const nlohmann::json& at(const std::string& key) const;
  bool has(const std::string& key) const { return node_->contains(key); }
  /// Accepts `key` without reading it: a key the front end writes for other readers.
  void skip(const std::string& key) const;
  /// Every key of this object, all marked read (a free-form table).
  std::vector<std::string> keys() const;

  /// The object at `key`.
  Reader child(const std::string& key) const;
  /// The objects of the non-empty list at `key`, named "key[i]".
  std::vector<Reader> objects(const std::string& key) const;

  /// A finite number >= min (> min unless `inclusive`).
  double number(const std::string& key, double min, bool inclusive = true) const;
  /// A finite number, unbounded.
  double number(const std::string& key) const;
  /// An integer in [min, max].
  std::int64_t integer(const std::string& key, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  /// An integer in [min, INT_MAX], for counts kept in an int.
  int int32(const std::string& key, std::int64_t min) const;
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;
  /// A non-empty list of integers in [1, max].
  std::vector<unsigned> counts(const std::string& key, unsigned max) const;
  /// The string at `key` turned into a value by `parse`, whose std::invalid_argument says what
  /// is wrong with it.
  template <class Parse>
  auto parsed(const std::string& key, Parse parse) const -> decltype(parse(std::string())) {
    const std::string text = string(key);
    try {
      return parse(text);
    } catch (const std::invalid_argument& e) {
      fail(key, e.what());
    }
  }

  [[noreturn]] void fail(const std::string& key, const std::string& why) const;
  /// `key`'s full path.
  std::string join(const std::string& key) const;
  const std::string& path() const { return path_; }

 private:
  friend class Document;
  Reader(const Document& document, const nlohmann::json& node, std::string path);

  const Document* document_;
  const nlohmann::json* node_;
  std::string path_;
};

template <class Parse>
auto load_with(const std::string& path, Parse parse) -> decltype(parse(nlohmann::json())) {
  const nlohmann::json document = load_json(path);
  try {
    return parse(document);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

}  // namespace harmonia::simkit
