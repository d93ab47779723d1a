// The token bucket in both its uses: a tenant's tokens-per-minute budget
// (burst, continuous refill, debt, the wait) and a stream's pace (a burst,
// then one token per 1/pace, refilled after a pause).

#include "scheduler/token_bucket.h"

#include <vector>

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
  EXPECT_TRUE(TokenBucket::PerMinute(0, absl::UnixEpoch()).unlimited());
}

TEST(TokenBucketTest, BurstRefillAndDebt) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket b = TokenBucket::PerMinute(120, t0);  // 2 tokens/s, burst 120
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

TEST(TokenBucketTest, PaceBurstThenSteadyPaceThenRefill) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket pace = TokenBucket::Pace(10, 3, t0);
  std::vector<absl::Time> out;
  for (int i = 0; i < 5; ++i) {
    const absl::Time at = pace.WhenAvailable(1, t0);
    pace.Take(1, at);
    out.push_back(at);
  }
  EXPECT_EQ(out[0], t0);
  EXPECT_EQ(out[1], t0);
  EXPECT_EQ(out[2], t0);
  EXPECT_EQ(out[3], t0 + absl::Milliseconds(100));
  EXPECT_EQ(out[4], t0 + absl::Milliseconds(200));
  // After a 10 s pause the bucket is full again (3 tokens, not 100).
  const absl::Time later = t0 + absl::Seconds(10);
  for (int i = 0; i < 3; ++i) {
    const absl::Time at = pace.WhenAvailable(1, later);
    EXPECT_EQ(at, later);
    pace.Take(1, at);
  }
  EXPECT_EQ(pace.WhenAvailable(1, later), later + absl::Milliseconds(100));
}

TEST(TokenBucketTest, UnpacedReleasesWhenReady) {
  TokenBucket pace = TokenBucket::Pace(0, 1, absl::UnixEpoch());
  EXPECT_TRUE(pace.unlimited());
  const absl::Time t = absl::UnixEpoch() + absl::Seconds(3);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(pace.WhenAvailable(1, t), t);
    pace.Take(1, t);
  }
}

// A pace's burst is at least one token.
TEST(TokenBucketTest, PaceBurstBelowOneCountsAsOne) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket pace = TokenBucket::Pace(4, 0, t0);
  EXPECT_EQ(pace.WhenAvailable(1, t0), t0);
  pace.Take(1, t0);
  EXPECT_EQ(pace.WhenAvailable(1, t0), t0 + absl::Milliseconds(250));
}

}  // namespace
}  // namespace paceline::scheduler
