#include "server/memory_trim.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace paceline::server {
namespace {

TEST(MemoryTrimmerTest, TrimsOnceOnGoingIdleAndPeriodicallyWhileBusy) {
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  MemoryTrimmer trimmer(absl::Seconds(10));
  EXPECT_TRUE(trimmer.Tick(/*idle=*/true, t0));  // the first idle tick
  EXPECT_FALSE(trimmer.Tick(true, t0 + absl::Seconds(1)));
  EXPECT_FALSE(trimmer.Tick(true, t0 + absl::Seconds(30)));  // still idle
  // Busy: at most every 10 s since the last trim.
  EXPECT_TRUE(trimmer.Tick(false, t0 + absl::Seconds(31)));
  EXPECT_FALSE(trimmer.Tick(false, t0 + absl::Seconds(40)));
  EXPECT_TRUE(trimmer.Tick(false, t0 + absl::Seconds(41)));
  EXPECT_FALSE(trimmer.Tick(false, t0 + absl::Seconds(42)));
  // Going idle right after a busy trim still trims: the calls that ended
  // since held what it frees.
  EXPECT_TRUE(trimmer.Tick(true, t0 + absl::Seconds(43)));
  EXPECT_FALSE(trimmer.Tick(true, t0 + absl::Seconds(44)));
  EXPECT_FALSE(trimmer.Tick(false, t0 + absl::Seconds(45)));
  EXPECT_TRUE(trimmer.Tick(true, t0 + absl::Seconds(46)));
}

}  // namespace
}  // namespace paceline::server
