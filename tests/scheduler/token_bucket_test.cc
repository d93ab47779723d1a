// The token bucket in both its uses: a tenant's tokens-per-minute budget
// (burst, continuous refill, debt, the wait for a reservation, giving back)
// and a stream's pace (a burst, then one token per 1/pace, refilled after a
// pause).

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
  EXPECT_TRUE(b.Allows(1000000, absl::UnixEpoch()));
  EXPECT_EQ(b.TimeUntilAllowed(1000000, absl::UnixEpoch()),
            absl::ZeroDuration());
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
  b.Take(130, t1);  // taking may overdraw
  EXPECT_FALSE(b.Allows(1, t1));
  EXPECT_EQ(b.TimeUntilAllowed(1, t1),
            absl::Seconds(5) + absl::Milliseconds(500));
  EXPECT_FALSE(b.Allows(1, t1 + absl::Seconds(5)));  // exactly zero
  EXPECT_TRUE(b.Allows(1, t1 + absl::Seconds(5) + absl::Milliseconds(500)));
  // A clock stepping back neither refills nor drains.
  EXPECT_EQ(b.Level(t1), 1);
}

TEST(TokenBucketTest, AllowsAReservationOnceItIsHeld) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket b = TokenBucket::PerMinute(60, t0);  // 1 token/s, burst 60
  EXPECT_TRUE(b.Allows(60, t0));
  b.Take(50, t0);
  EXPECT_TRUE(b.Allows(10, t0));
  EXPECT_FALSE(b.Allows(11, t0));
  EXPECT_EQ(b.TimeUntilAllowed(11, t0), absl::Seconds(1));
  EXPECT_EQ(b.TimeUntilAllowed(10, t0), absl::ZeroDuration());
  // More than the burst: allowed only when full, and it leaves a debt.
  EXPECT_EQ(b.TimeUntilAllowed(1000, t0), absl::Seconds(50));
  EXPECT_FALSE(b.Allows(1000, t0 + absl::Seconds(49)));
  EXPECT_TRUE(b.Allows(1000, t0 + absl::Seconds(50)));
  b.Take(70, t0 + absl::Seconds(50));
  EXPECT_EQ(b.Level(t0 + absl::Seconds(50)), -10);
  EXPECT_EQ(b.TimeUntilAllowed(5, t0 + absl::Seconds(50)), absl::Seconds(15));
  // A rate that does not divide evenly: at the time promised, it is held.
  TokenBucket odd = TokenBucket::PerMinute(100, t0);  // 5/3 tokens/s
  odd.Take(100, t0);
  const absl::Time at = t0 + odd.TimeUntilAllowed(30, t0);
  EXPECT_FALSE(odd.Allows(30, at - absl::Milliseconds(1)));
  EXPECT_TRUE(odd.Allows(30, at));
  odd.Take(30, at);
  EXPECT_GE(odd.Level(at), 0);
}

TEST(TokenBucketTest, GiveReturnsUnusedTokensUpToTheCapacity) {
  const absl::Time t0 = absl::UnixEpoch();
  TokenBucket b = TokenBucket::PerMinute(60, t0);
  b.Take(50, t0);
  b.Give(30, t0);
  EXPECT_EQ(b.Level(t0), 40);
  b.Give(30, t0);  // the burst never grows
  EXPECT_EQ(b.Level(t0), 60);
  b.Take(70, t0);
  b.Give(5, t0 + absl::Seconds(2));  // pays the debt: -10 + 2 + 5
  EXPECT_EQ(b.Level(t0 + absl::Seconds(2)), -3);
  TokenBucket unlimited;
  unlimited.Give(5, t0);
  EXPECT_TRUE(unlimited.Allows(1e12, t0));
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
