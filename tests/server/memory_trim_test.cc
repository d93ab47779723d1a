#include "server/memory_trim.h"

#include <cstdint>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace paceline::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A heap whose readings the test sets; a trim gives back what `trimmable`
// says, as glibc's malloc_trim gives back free pages (the free bytes stay
// counted by the allocator).
struct FakeHeap {
  HeapProbe::Reading now{.rss_bytes = 200 * kMiB, .free_bytes = 1 * kMiB};
  int64_t trimmable = 0;
  int trims = 0;

  HeapProbe Probe() {
    return HeapProbe{.read = [this] { return now; },
                     .release =
                         [this] {
                           ++trims;
                           now.rss_bytes -= trimmable;
                           trimmable = 0;
                         }};
  }
};

class MemoryTrimmerTest : public ::testing::Test {
 protected:
  absl::Time At(int seconds) const { return t0_ + absl::Seconds(seconds); }

  const absl::Time t0_ = absl::UnixEpoch() + absl::Hours(1);
  FakeHeap heap_;
  MemoryTrimmer trimmer_{absl::Seconds(10), heap_.Probe(), 8 * kMiB};
};

TEST_F(MemoryTrimmerTest, NothingToGiveBackMeansNoTrim) {
  for (int s = 0; s < 60; ++s) {
    EXPECT_FALSE(trimmer_.Tick(/*idle=*/s % 2 == 0, At(s)));
  }
  heap_.now.rss_bytes += 4 * kMiB;  // within the slack
  EXPECT_FALSE(trimmer_.Tick(true, At(61)));
  EXPECT_EQ(heap_.trims, 0);
}

TEST_F(MemoryTrimmerTest, AnIdleDaemonTrimsWhatItsCallsLeftResident) {
  heap_.now.rss_bytes += 300 * kMiB;  // a large answer, built and freed
  heap_.now.free_bytes += 300 * kMiB;
  heap_.trimmable = 280 * kMiB;
  EXPECT_TRUE(trimmer_.Tick(true, At(1)));
  EXPECT_EQ(heap_.now.rss_bytes, 220 * kMiB);
  // Given back: the next idle ticks have nothing to do.
  EXPECT_FALSE(trimmer_.Tick(true, At(2)));
  EXPECT_FALSE(trimmer_.Tick(true, At(3)));
}

TEST_F(MemoryTrimmerTest, MemoryFreedAfterAnIdleTrimIsTrimmedToo) {
  // The calls ended, but the answer's body is still being written: the
  // trim finds its pages in use.
  heap_.now.rss_bytes += 300 * kMiB;
  EXPECT_TRUE(trimmer_.Tick(true, At(1)));
  EXPECT_EQ(heap_.now.rss_bytes, 500 * kMiB);
  EXPECT_FALSE(trimmer_.Tick(true, At(2)));
  // Written and freed: the allocator now holds it.
  heap_.now.free_bytes += 300 * kMiB;
  heap_.trimmable = 290 * kMiB;
  EXPECT_TRUE(trimmer_.Tick(true, At(3)));
  EXPECT_EQ(heap_.now.rss_bytes, 210 * kMiB);
  EXPECT_FALSE(trimmer_.Tick(true, At(4)));
}

TEST_F(MemoryTrimmerTest, ReusedFreePagesAreTrimmedAgain) {
  // After a trim the allocator still counts its free (now unmapped)
  // chunks: a request that reuses and frees them leaves the free bytes
  // where they were, but not the RSS.
  heap_.now.free_bytes += 300 * kMiB;
  heap_.now.rss_bytes += 300 * kMiB;
  heap_.trimmable = 300 * kMiB;
  ASSERT_TRUE(trimmer_.Tick(true, At(1)));
  heap_.now.free_bytes -= 200 * kMiB;  // reused while busy
  heap_.now.rss_bytes += 200 * kMiB;
  EXPECT_FALSE(trimmer_.Tick(false, At(2)));  // busy: once per period
  heap_.now.free_bytes += 200 * kMiB;  // freed
  heap_.trimmable = 200 * kMiB;
  EXPECT_TRUE(trimmer_.Tick(true, At(3)));
  EXPECT_EQ(heap_.now.rss_bytes, 200 * kMiB);
}

TEST_F(MemoryTrimmerTest, ABusyDaemonTrimsAtMostOncePerPeriod) {
  int trims = 0;
  for (int s = 1; s <= 30; ++s) {
    heap_.now.rss_bytes += 20 * kMiB;  // growing every second
    heap_.now.free_bytes += 20 * kMiB;
    heap_.trimmable = 20 * kMiB;
    trims += trimmer_.Tick(/*idle=*/false, At(s)) ? 1 : 0;
  }
  EXPECT_EQ(trims, 3);  // at 1, 11 and 21 s
  EXPECT_EQ(heap_.trims, 3);
}

TEST(HeapOfThisProcessTest, ReadsAPlausibleRss) {
  const HeapProbe heap = HeapOfThisProcess();
  const HeapProbe::Reading r = heap.read();
  EXPECT_GT(r.rss_bytes, 1 * kMiB);
  EXPECT_GE(r.free_bytes, 0);
  heap.release();  // must not crash
}

}  // namespace
}  // namespace paceline::server
