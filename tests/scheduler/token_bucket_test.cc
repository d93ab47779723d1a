// The tokens-per-minute bucket: burst, continuous refill, debt, the wait.

#include "scheduler/token_bucket.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace paceline::scheduler {
namespace {

TEST(TokenBucketTest, UnlimitedAlwaysAllows) {
  TokenBucket b;
  EXPECT_TRUE(b.unlimited());
  b.Take(1000000, absl::UnixEpoch());
  EXPECT_TRUE(b.Allows(absl::UnixEpoch()));
  EXPECT_EQ(b.TimeUntilAllowed(absl::UnixEpoch()), absl::ZeroDuration());
  EXPECT_TRUE(TokenBucket(0, absl::UnixEpoch()).unlimited());
}

TEST(TokenBucketTest, BurstRefillAndDebt) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket b(120, t0);  // 2 tokens/s, burst 120
  EXPECT_EQ(b.Level(t0), 120);
  b.Take(100, t0);
  EXPECT_EQ(b.Level(t0), 20);
  EXPECT_EQ(b.Level(t0 + absl::Seconds(5)), 30);
  EXPECT_EQ(b.Level(t0 + absl::Seconds(100)), 120);  // capped at the burst
  const absl::Time t1 = t0 + absl::Seconds(100);
  b.Take(130, t1);  // service under way may overdraw
  EXPECT_FALSE(b.Allows(t1));
  EXPECT_EQ(b.TimeUntilAllowed(t1), absl::Seconds(5) + absl::Milliseconds(1));
  EXPECT_FALSE(b.Allows(t1 + absl::Seconds(5)));  // exactly zero
  EXPECT_TRUE(b.Allows(t1 + absl::Seconds(5) + absl::Milliseconds(1)));
  // A clock stepping back neither refills nor drains.
  EXPECT_NEAR(b.Level(t1), 0.002, 1e-9);
}

}  // namespace
}  // namespace paceline::scheduler
