// WaitFor: how often it asks, when it gives up, and what it says then. The
// timeouts are only upper limits on how long a test may wait; nothing here
// asserts how long a wait took.

#include "tests/testing/wait_for.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline::testing {
namespace {

using ::testing::HasSubstr;

TEST(WaitForTest, SucceedsAtOnceWhenTheConditionHolds) {
  int calls = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        ++calls;
        return true;
      },
      absl::ZeroDuration(), "nothing"));
  EXPECT_EQ(calls, 1);
}

TEST(WaitForTest, PollsUntilTheConditionHolds) {
  int calls = 0;
  EXPECT_TRUE(WaitFor([&] { return ++calls == 3; }, absl::Seconds(60),
                      "the third call", absl::ZeroDuration()));
  EXPECT_EQ(calls, 3);
}

TEST(WaitForTest, FailsWithWhatItWaitedFor) {
  int calls = 0;
  const ::testing::AssertionResult r = WaitFor(
      [&] {
        ++calls;
        return false;
      },
      absl::Milliseconds(20), "three paced streams", absl::Milliseconds(1));
  EXPECT_FALSE(r);
  EXPECT_THAT(
      r.message(),
      HasSubstr("timed out after 20ms waiting for three paced streams"));
  EXPECT_GE(calls, 1);
}

}  // namespace
}  // namespace paceline::testing
