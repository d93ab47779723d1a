// The command-line parser and its typed getters: what each accepts, and
// that every error names the flag.

#include "common/args.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr FlagDef kFlags[] = {
    {"n", true}, {"x", true}, {"json", false}, {"tag", true}};

ParsedArgs Parse(std::vector<std::string> words) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(words, kFlags);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : ParsedArgs();
}

// --n VALUE, parsed.
ParsedArgs WithN(std::string value) { return Parse({"--n", std::move(value)}); }

std::string ErrorOf(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(ParseArgsTest, FormsOfFlagsAndPositionals) {
  const ParsedArgs a = Parse({"in.txt", "--n", "1", "--x=2", "--json", "--tag",
                              "a", "--tag=b", "--", "--n"});
  EXPECT_EQ(a.Get("n"), "1");
  EXPECT_EQ(a.Get("x"), "2");
  EXPECT_TRUE(a.Has("json"));
  EXPECT_EQ(a.Get("tag"), "b");  // the last occurrence wins
  EXPECT_THAT(a.GetAll("tag"), ElementsAre("a", "b"));
  EXPECT_THAT(a.positional(), ElementsAre("in.txt", "--n"));
  EXPECT_FALSE(a.help());
  EXPECT_EQ(a.Get("missing"), std::nullopt);
  EXPECT_TRUE(Parse({"-h"}).help());
  EXPECT_TRUE(Parse({"--help"}).help());
}

TEST(ParseArgsTest, ErrorsNameTheFlag) {
  auto error = [](std::vector<std::string> words) {
    return ErrorOf(ParseArgs(words, kFlags).status());
  };
  EXPECT_EQ(error({"--bogus"}), "unknown flag --bogus");
  EXPECT_EQ(error({"--json=1"}), "flag --json takes no value");
  EXPECT_EQ(error({"--n"}), "flag --n needs a value");
}

TEST(IntFlagTest, AcceptsWholeNumbersInRange) {
  EXPECT_EQ(*ParseIntFlag("n", "-12"), -12);
  EXPECT_EQ(*ParseIntFlag("n", "9223372036854775807"),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*ParseIntFlag("n", "0", {.min = 0, .max = 0}), 0);
  EXPECT_EQ(*GetIntFlag(WithN("7"), "n", {.min = 1}), 7);
  EXPECT_EQ(*GetIntFlag(Parse({}), "n", {.min = 1}), std::nullopt);
}

TEST(IntFlagTest, ErrorsSayWhatIsWanted) {
  EXPECT_EQ(ErrorOf(ParseIntFlag("n", "many").status()),
            "--n wants a whole number, got 'many'");
  EXPECT_EQ(ErrorOf(ParseIntFlag("n", "1.5").status()),
            "--n wants a whole number, got '1.5'");
  EXPECT_EQ(ErrorOf(ParseIntFlag("n", "9223372036854775808").status()),
            "--n wants a whole number, got '9223372036854775808'");
  EXPECT_EQ(ErrorOf(ParseIntFlag("n", "0", {.min = 1}).status()),
            "--n wants a whole number >= 1, got '0'");
  EXPECT_EQ(ErrorOf(ParseIntFlag("n", "9", {.max = 8}).status()),
            "--n wants a whole number <= 8, got '9'");
  EXPECT_EQ(ErrorOf(GetIntFlag(WithN("1025"), "n", {0, 1024}).status()),
            "--n wants a whole number in [0, 1024], got '1025'");
  EXPECT_EQ(ErrorOf(GetIntFlag(WithN(""), "n").status()),
            "--n wants a whole number, got ''");
}

TEST(Int32FlagTest, FitsInt32ThenTheRange) {
  EXPECT_EQ(*GetInt32Flag(WithN("2147483647"), "n"), 2147483647);
  EXPECT_EQ(*GetInt32Flag(WithN("-2147483648"), "n"), -2147483647 - 1);
  EXPECT_EQ(*GetInt32Flag(Parse({}), "n"), std::nullopt);
  EXPECT_EQ(ErrorOf(GetInt32Flag(WithN("2147483648"), "n").status()),
            "--n: 2147483648 is out of range");
  EXPECT_EQ(ErrorOf(GetInt32Flag(WithN("x"), "n").status()),
            "--n wants a whole number, got 'x'");
  EXPECT_EQ(ErrorOf(GetInt32Flag(WithN("0"), "n", {.min = 1}).status()),
            "--n wants a whole number >= 1, got '0'");
}

TEST(Uint64FlagTest, TheWholeUnsignedRange) {
  EXPECT_EQ(*GetUint64Flag(WithN("0"), "n"), 0u);
  EXPECT_EQ(*GetUint64Flag(WithN("18446744073709551615"), "n"),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*GetUint64Flag(Parse({}), "n"), std::nullopt);
  for (const char* bad : {"-3", "18446744073709551616", "seven", "1e3"}) {
    EXPECT_EQ(ErrorOf(GetUint64Flag(WithN(bad), "n").status()),
              absl::StrCat("--n wants a whole number >= 0, got '", bad, "'"));
  }
}

TEST(NumberFlagTest, AcceptsFiniteNumbersInRange) {
  EXPECT_DOUBLE_EQ(*ParseNumberFlag("x", "-0.25"), -0.25);
  EXPECT_DOUBLE_EQ(*ParseNumberFlag("x", "1e3"), 1000);
  EXPECT_DOUBLE_EQ(*ParseNumberFlag("x", "0", kNonNegative), 0);
  EXPECT_DOUBLE_EQ(*ParseNumberFlag("x", "0.001", kPositive), 0.001);
  EXPECT_DOUBLE_EQ(
      *ParseNumberFlag("x", "1", {.min = 0, .min_exclusive = true, .max = 1}),
      1);
  EXPECT_DOUBLE_EQ(**GetNumberFlag(Parse({"--x", "2.5"}), "x"), 2.5);
  EXPECT_EQ(*GetNumberFlag(Parse({}), "x"), std::nullopt);
}

TEST(NumberFlagTest, ErrorsSayWhatIsWanted) {
  for (const char* bad : {"half", "nan", "inf", "-inf", "1e999", ""}) {
    EXPECT_EQ(ErrorOf(ParseNumberFlag("x", bad).status()),
              absl::StrCat("--x wants a number, got '", bad, "'"));
  }
  EXPECT_EQ(ErrorOf(ParseNumberFlag("x", "0", kPositive).status()),
            "--x wants a number > 0, got '0'");
  EXPECT_EQ(ErrorOf(ParseNumberFlag("x", "-1", kNonNegative).status()),
            "--x wants a number >= 0, got '-1'");
  EXPECT_EQ(ErrorOf(ParseNumberFlag("x", "3", {.max = 2}).status()),
            "--x wants a number <= 2, got '3'");
  EXPECT_EQ(ErrorOf(ParseNumberFlag("x", "0",
                                    {.min = 0, .min_exclusive = true, .max = 1})
                        .status()),
            "--x wants a number in (0, 1], got '0'");
  EXPECT_EQ(ErrorOf(ParseNumberFlag("tenant a: WEIGHT", "w").status()),
            "--tenant a: WEIGHT wants a number, got 'w'");
}

TEST(ByteSizeFlagTest, ParsesAndNamesTheFlag) {
  EXPECT_EQ(**GetByteSizeFlag(WithN("2GiB"), "n"), uint64_t{2} << 30);
  EXPECT_EQ(*GetByteSizeFlag(Parse({}), "n"), std::nullopt);
  const absl::Status bad = GetByteSizeFlag(WithN("24XB"), "n").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("--n: '24XB' is not a byte size"));
  const absl::Status big = GetByteSizeFlag(WithN("1e30"), "n").status();
  EXPECT_EQ(big.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(big.message(), "--n: '1e30' is more than 2^64 - 1 bytes");
}

TEST(ForFlagTest, PrefixesTheMessageKeepsTheCode) {
  const absl::Status s = ForFlag("kv-dtype", absl::NotFoundError("no such"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "--kv-dtype: no such");
}

}  // namespace
}  // namespace paceline
