// The simulators' strict JSON reader: key paths in errors, finite numbers, unknown keys.
#include <gtest/gtest.h>

#include <limits>

#include "simkit/json_reader.hpp"

using harmonia::simkit::Document;
using harmonia::simkit::InputError;
using harmonia::simkit::Reader;
using nlohmann::json;

namespace {

const json kDoc = json::parse(R"({"name": "t", "rate": 2.5, "count": 3,
  "tree": {"down": [4, 2], "on": true},
  "apps": [{"name": "a", "size": 1}, {"name": "b", "size": 2}]})");

/// Reads every key of kDoc-shaped documents the way a simulator would; returns the error or "".
std::string read_all(const json& doc) {
  try {
    const Document document(doc);
    const Reader root = document.root();
    root.string("name");
    root.number("rate", 0, false);
    root.int32("count", 1);
    const Reader tree = root.child("tree");
    tree.counts("down", 8);
    tree.boolean("on");
    for (const Reader& app : root.objects("apps")) {
      app.string("name");
      app.number("size", 0, false);
    }
    document.check_all_read();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

json with(const std::string& pointer, const json& value) {
  json d = kDoc;
  d[json::json_pointer(pointer)] = value;
  return d;
}

}  // namespace

TEST(JsonReader, ReadsAValidDocument) { EXPECT_EQ(read_all(kDoc), ""); }

TEST(JsonReader, ErrorsNameTheFullKeyPath) {
  EXPECT_EQ(read_all(with("/apps/1/size", 0)), "apps[1].size: must be > 0.000000");
  EXPECT_EQ(read_all(with("/apps/1/size", "big")), "apps[1].size: must be a number");
  EXPECT_EQ(read_all(with("/tree/down", json::array({4, 9}))),
            "tree.down: entries must be integers in [1, 8]");
  EXPECT_EQ(read_all(with("/tree/on", 1)), "tree.on: must be true or false");
  EXPECT_EQ(read_all(with("/count", 2.5)), "count: must be an integer");
  EXPECT_EQ(read_all(with("/count", 1LL << 40)), "count: must be <= 2147483647");
  EXPECT_EQ(read_all(with("/tree", json::array())), "tree: must be an object");
  EXPECT_EQ(read_all(with("/apps", json::array())), "apps: must be a non-empty list");
  EXPECT_EQ(read_all(with("/apps/0", 5)), "apps[0]: must be an object");
  json missing = kDoc;
  missing["apps"][0].erase("name");
  EXPECT_EQ(read_all(missing), "apps[0].name: missing");
  EXPECT_EQ(read_all(json::array()), "document: must be an object");
}

TEST(JsonReader, NumbersMustBeFinite) {
  // JSON text has no infinity (the parser refuses 1e400), but a document built in code can.
  EXPECT_EQ(read_all(with("/rate", std::numeric_limits<double>::infinity())),
            "rate: must be a finite number");
  EXPECT_THROW(harmonia::simkit::parse_json(R"({"rate": 1e400})", "src"), InputError);
}

TEST(JsonReader, UnknownKeysAreErrorsWithTheirPath) {
  EXPECT_EQ(read_all(with("/rates", 1)), "rates: unknown key");
  EXPECT_EQ(read_all(with("/apps/1/sise", 1)), "apps[1].sise: unknown key");
  EXPECT_EQ(read_all(with("/tree/levels", 2)), "tree.levels: unknown key");
}

TEST(JsonReader, SkippedAndListedKeysAreRead) {
  const json doc = json::parse(R"({"ranks": 4, "options": {"a": "1", "b": "2"}})");
  const Document document(doc);
  const Reader root = document.root();
  root.skip("ranks");
  EXPECT_EQ(root.child("options").keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_NO_THROW(document.check_all_read());
}

TEST(JsonReader, ParsedNamesTheKeyOfARefusedValue) {
  const json doc = json::parse(R"({"order": "sideways"})");
  const Document document(doc);
  auto parse = [](const std::string& s) -> int {
    if (s == "up") return 1;
    throw std::invalid_argument("must be up");
  };
  try {
    document.root().parsed("order", parse);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "order: must be up");
  }
}

TEST(JsonReader, FilesNameTheirPath) {
  try {
    harmonia::simkit::load_json("/nonexistent/x.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/x.json: cannot read");
  }
  EXPECT_THROW(harmonia::simkit::parse_json("{", "src"), InputError);
}
