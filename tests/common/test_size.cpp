// The size grammar of the command lines and the environment, against the vectors that the
// Python parser (harmonia.units.parse_size) reads too: one grammar in both languages.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/size.hpp"

namespace {

using harmonia::common::parse_size;

nlohmann::json vectors() {
  std::ifstream in(SIZE_VECTORS);
  return nlohmann::json::parse(in);
}

TEST(Size, ReadsTheSharedVectorsAsPythonDoes) {
  const auto all = vectors();
  ASSERT_GT(all.at("cases").size(), 20u);
  for (const auto& entry : all.at("cases")) {
    const auto text = entry.at("text").get<std::string>();
    const auto parsed = parse_size(text);
    if (entry.at("bytes").is_null())
      EXPECT_FALSE(parsed.has_value()) << '"' << text << "\" gave " << parsed.value_or(0);
    else
      EXPECT_EQ(parsed, entry.at("bytes").get<size_t>()) << '"' << text << '"';
  }
}

// (The vectors are kept in a variable: a range-for over a member of a temporary would read freed
// memory.)
TEST(Size, ABareNumberIsBytes) {
  const auto all = vectors();
  for (const auto& entry : all.at("bare"))
    EXPECT_EQ(parse_size(entry.at("text").get<std::string>()), entry.at("bytes").get<size_t>());
}

TEST(Size, RefusesZeroNegativeAndTooLarge) {
  const auto all = vectors();
  for (const auto& entry : all.at("zero"))
    EXPECT_FALSE(parse_size(entry.at("text").get<std::string>()).has_value());
  EXPECT_FALSE(parse_size("-1 GB").has_value());
  EXPECT_EQ(parse_size("4 EiB"), std::nullopt);  // no such unit
  EXPECT_EQ(parse_size("4096P"), size_t{1} << 62);
  EXPECT_FALSE(parse_size("4097P").has_value());
  EXPECT_FALSE(parse_size("1e19 B").has_value());
  EXPECT_FALSE(parse_size("99999999999999999999999999999999 GB").has_value());
  EXPECT_FALSE(parse_size("1e999999 B").has_value());
  EXPECT_EQ(parse_size("0.000000000000000000000000000001e30 B"), 1u);
}

}  // namespace
