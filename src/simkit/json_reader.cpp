#include "simkit/json_reader.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace harmonia::simkit {

using nlohmann::json;

json parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // syntax, or a number too large for a double
    throw InputError(source + ": not valid JSON: " + e.what());
  }
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

Reader Document::root() const { return Reader(*this, root_, ""); }

Document::Seen& Document::seen(const json& object, const std::string& path) const {
  const auto [it, inserted] = index_.try_emplace(&object, objects_.size());
  if (inserted) objects_.push_back({path, {}});
  return objects_[it->second];
}

void Document::check_all_read() const {
  // Objects in the order they were opened, so that the error is the same on every run.
  std::vector<const json*> by_order(objects_.size());
  for (const auto& [node, i] : index_) by_order[i] = node;
  for (size_t i = 0; i < objects_.size(); ++i)
    for (const auto& item : by_order[i]->items())
      if (!objects_[i].read.contains(item.key()))
        throw InputError((objects_[i].path.empty() ? "" : objects_[i].path + ".") + item.key() +
                         ": unknown key");
}

Reader::Reader(const Document& document, const json& node, std::string path)
    : document_(&document), node_(&node), path_(std::move(path)) {
  if (!node.is_object())
    throw InputError((path_.empty() ? "document" : path_) + ": must be an object");
  document.seen(node, path_);
}

const json& Reader::at(const std::string& key) const {
  if (!node_->contains(key)) fail(key, "missing");
  document_->seen(*node_, path_).read.insert(key);
  return node_->at(key);
}

void Reader::skip(const std::string& key) const { document_->seen(*node_, path_).read.insert(key); }

std::vector<std::string> Reader::keys() const {
  std::vector<std::string> out;
  for (const auto& item : node_->items()) out.push_back(item.key());
  for (const auto& key : out) skip(key);
  return out;
}

Reader Reader::child(const std::string& key) const { return {*document_, at(key), join(key)}; }

std::vector<Reader> Reader::objects(const std::string& key) const {
  const json& list = at(key);
  if (!list.is_array() || list.empty()) fail(key, "must be a non-empty list");
  std::vector<Reader> out;
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(Reader(*document_, list[i], join(key) + "[" + std::to_string(i) + "]"));
  return out;
}

double Reader::number(const std::string& key) const {
  const json& v = at(key);
  if (!v.is_number()) fail(key, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(key, "must be a finite number");
  return x;
}

double Reader::number(const std::string& key, double min, bool inclusive) const {
  const double x = number(key);
  if (inclusive ? !(x >= min) : !(x > min))
    fail(key, std::string("must be ") + (inclusive ? ">= " : "> ") + std::to_string(min));
  return x;
}

std::int64_t Reader::integer(const std::string& key, std::int64_t min, std::int64_t max) const {
  const json& v = at(key);
  if (!v.is_number_integer()) fail(key, "must be an integer");
  // Unsigned values past INT64_MAX would wrap in get<int64_t>.
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    fail(key, "must be <= " + std::to_string(max));
  const auto x = v.get<std::int64_t>();
  if (x < min) fail(key, "must be >= " + std::to_string(min));
  if (x > max) fail(key, "must be <= " + std::to_string(max));
  return x;
}

int Reader::int32(const std::string& key, std::int64_t min) const {
  return static_cast<int>(integer(key, min, std::numeric_limits<int>::max()));
}

bool Reader::boolean(const std::string& key) const {
  const json& v = at(key);
  if (!v.is_boolean()) fail(key, "must be true or false");
  return v.get<bool>();
}

std::string Reader::string(const std::string& key) const {
  const json& v = at(key);
  if (!v.is_string()) fail(key, "must be a string");
  return v.get<std::string>();
}

std::vector<unsigned> Reader::counts(const std::string& key, unsigned max) const {
  const json& v = at(key);
  if (!v.is_array() || v.empty()) fail(key, "must be a non-empty list");
  std::vector<unsigned> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > max)
      fail(key, "entries must be integers in [1, " + std::to_string(max) + "]");
    out.push_back(x.get<unsigned>());
  }
  return out;
}

void Reader::fail(const std::string& key, const std::string& why) const {
  throw InputError(join(key) + ": " + why);
}

std::string Reader::join(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

}  // namespace harmonia::simkit
