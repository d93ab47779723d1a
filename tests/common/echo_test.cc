#include "common/echo.h"

#include <string>

#include "gtest/gtest.h"

namespace paceline {
namespace {

TEST(EchoTest, ShortTextIsKept) {
  EXPECT_EQ(Echo(""), "");
  EXPECT_EQ(Echo("llama"), "llama");
  EXPECT_EQ(Echo(std::string(kMaxEchoBytes, 'x')),
            std::string(kMaxEchoBytes, 'x'));
}

TEST(EchoTest, LongTextIsCutAndSaysItsSize) {
  const std::string name(7000, 'm');
  EXPECT_EQ(Echo(name), std::string(kMaxEchoBytes, 'm') + "... (7000 bytes)");
  EXPECT_EQ(Echo("abcdef", 3), "abc... (6 bytes)");
}

// A cut never splits a UTF-8 sequence: "é" is 2 bytes, "€" 3.
TEST(EchoTest, CutsAtACharacterBoundary) {
  EXPECT_EQ(Echo("a\xC3\xA9z", 2), "a... (4 bytes)");
  EXPECT_EQ(Echo("\xE2\x82\xAC\xE2\x82\xAC", 4), "\xE2\x82\xAC... (6 bytes)");
  EXPECT_EQ(Echo("\xE2\x82\xAC\xE2\x82\xAC", 2), "... (6 bytes)");
}

}  // namespace
}  // namespace paceline
