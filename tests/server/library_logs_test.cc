// Rate-limited library logs (server/library_logs.h): the limiter's window,
// and libprotobuf's per-message parse errors held to the budget.

#include "server/library_logs.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.pb.h"

namespace paceline::server {
namespace {

TEST(LogLimiterTest, AdmitsItsBudgetPerWindowThenReportsTheDrops) {
  LogLimiter limiter(3, absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t dropped = -1;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.Admit(t0 + absl::Seconds(i), &dropped));
    EXPECT_EQ(dropped, 0);
  }
  EXPECT_FALSE(limiter.Admit(t0 + absl::Seconds(5), &dropped));
  EXPECT_FALSE(limiter.Admit(t0 + absl::Seconds(9), &dropped));
  EXPECT_TRUE(limiter.Admit(t0 + absl::Seconds(10), &dropped));  // new window
  EXPECT_EQ(dropped, 2);
  EXPECT_TRUE(limiter.Admit(t0 + absl::Seconds(11), &dropped));
  EXPECT_EQ(dropped, 0);
}

// A GenerateRequest whose text field holds invalid UTF-8 makes libprotobuf
// log an error per parse; 1,000 of them write at most the budget (plus no
// more than one drop report).
TEST(LibraryLogsTest, ProtobufParseErrorsAreRateLimited) {
  InstallLibraryLogLimits();
  v1::GenerateRequest bad;
  std::string bytes;
  {
    v1::GenerateRequest r;
    r.set_text("x");
    bytes = r.SerializeAsString();
    bytes.back() = '\xff';  // the text's one byte: not UTF-8
  }
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(bad.ParseFromString(bytes));
  const std::string log = ::testing::internal::GetCapturedStderr();
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "pacelined: libprotobuf: ")) << line;
    ++lines;
  }
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, kLibraryLogLines);
}

}  // namespace
}  // namespace paceline::server
