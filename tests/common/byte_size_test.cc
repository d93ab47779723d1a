// ParseByteSize: every accepted spelling, exact rounding, the 64-bit limit
// and what it rejects.

#include "common/byte_size.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace paceline {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ParseByteSizeTest, PlainNumbersAndUnits) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("123456789"), 123456789u);
  EXPECT_EQ(*ParseByteSize("1e9"), 1'000'000'000u);
  EXPECT_EQ(*ParseByteSize("2.5E3"), 2500u);
  EXPECT_EQ(*ParseByteSize("1e+3"), 1000u);
  EXPECT_EQ(*ParseByteSize("24GiB"), 24 * kGiB);
  EXPECT_EQ(*ParseByteSize("16GB"), 16'000'000'000u);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512u << 20);
  EXPECT_EQ(*ParseByteSize("512 mib"), 512u << 20);
  EXPECT_EQ(*ParseByteSize(" 1.5GiB "), 3 * kGiB / 2);
  EXPECT_EQ(*ParseByteSize("1KB"), 1000u);
  EXPECT_EQ(*ParseByteSize("1kib"), 1024u);
  EXPECT_EQ(*ParseByteSize("1mb"), 1'000'000u);
  EXPECT_EQ(*ParseByteSize("2TB"), 2'000'000'000'000u);
  EXPECT_EQ(*ParseByteSize("1TiB"), uint64_t{1} << 40);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
  EXPECT_EQ(*ParseByteSize("100b"), 100u);
  EXPECT_EQ(*ParseByteSize(".5KiB"), 512u);
  EXPECT_EQ(*ParseByteSize("2.KiB"), 2048u);
  EXPECT_EQ(*ParseByteSize("1e-3GB"), 1'000'000u);
  EXPECT_EQ(*ParseByteSize("1.50000000000000000000000000GB"), 1'500'000'000u);
  EXPECT_EQ(*ParseByteSize("0000000000000000000000000001"), 1u);
}

TEST(ParseByteSizeTest, FractionsRoundDown) {
  EXPECT_EQ(*ParseByteSize("1.9"), 1u);
  EXPECT_EQ(*ParseByteSize("0.1KiB"), 102u);
  EXPECT_EQ(*ParseByteSize("1e-3"), 0u);
  EXPECT_EQ(*ParseByteSize("1e-100"), 0u);
  EXPECT_EQ(*ParseByteSize("0e99999"), 0u);
}

TEST(ParseByteSizeTest, LimitsOf64Bits) {
  EXPECT_EQ(*ParseByteSize("18446744073709551615"),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*ParseByteSize("16777215TiB"), uint64_t{16777215} << 40);
  for (auto text : {"18446744073709551616", "1e20", "16777216TiB", "1e99999",
                    "1e1000000"}) {
    const absl::Status s = ParseByteSize(text).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << text << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "more than 2^64 - 1 bytes"))
        << s;
  }
}

TEST(ParseByteSizeTest, Rejects) {
  for (auto text :
       {"",     " ",      "GiB", "-1",   "+1",        "1x",
        "1 G",  "1e",     "1e+", "1..5", "abc",       "1GiB2",
        "0x10", "1,000",  "nan", "inf",  "1e1000001", "123456789012345678901",
        "1k",   "1 KiB B"}) {
    const absl::Status s = ParseByteSize(text).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << "'" << text << "': " << s;
  }
}

TEST(ParseByteSizeTest, ErrorsQuoteTheTextAndSayWhy) {
  EXPECT_EQ(ParseByteSize("24XB").status().message(),
            "'24XB' is not a byte size: unknown unit (use B, KB, MB, GB, TB, "
            "KiB, MiB, GiB, TiB)");
  EXPECT_EQ(ParseByteSize("-1GB").status().message(),
            "'-1GB' is not a byte size: expected a number, e.g. 24GiB or 1e9");
  EXPECT_EQ(ParseByteSize("1e").status().message(),
            "'1e' is not a byte size: exponent has no digits");
  EXPECT_EQ(ParseByteSize("1e12345678").status().message(),
            "'1e12345678' is not a byte size: exponent too large");
  EXPECT_EQ(ParseByteSize("123456789012345678901").status().message(),
            "'123456789012345678901' is not a byte size: too many significant "
            "digits");
}

}  // namespace
}  // namespace paceline
