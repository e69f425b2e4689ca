// The one rule for file names passed between the programs (relative to the PFS root).
#include <gtest/gtest.h>

#include <string>

#include "common/file_name.hpp"

using harmonia::common::plain_relative_name;

TEST(PlainRelativeName, AcceptsPathsBeneathTheRootWithOneSpelling) {
  for (const std::string ok : {"a", "run/ckpt.0", "a/b/c.h5", ".hidden/x", "a..b"})
    EXPECT_TRUE(plain_relative_name(ok)) << ok;
}

TEST(PlainRelativeName, RefusesWhatLeavesTheRootOrHasAnotherSpelling) {
  const std::string too_long_part(256, 'x');
  const std::string too_long(4097, 'x');
  for (const std::string& bad :
       {std::string(), std::string("/abs"), std::string("../a"), std::string("a/.."),
        std::string("a//b"), std::string("a/./b"), std::string("a/"), std::string("."),
        std::string("a\0b", 3), "d/" + too_long_part, too_long})
    EXPECT_FALSE(plain_relative_name(bad)) << bad.size() << " bytes: " << bad.substr(0, 20);
  EXPECT_TRUE(plain_relative_name("d/" + std::string(255, 'x')));
}
