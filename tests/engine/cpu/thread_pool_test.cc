#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

// Runs ParallelFor(n) and checks that every index is covered exactly once,
// by at most num_threads calls, each on the range Partition promises.
void CheckCoverage(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n > 0 ? n : 0));
  std::mutex mu;
  std::set<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    ASSERT_LT(begin, end);
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    ranges.insert({begin, end});
    threads.insert(std::this_thread::get_id());
  });
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
  }
  const int64_t used = std::min<int64_t>(pool.num_threads(), n);
  EXPECT_EQ(static_cast<int64_t>(ranges.size()), n > 0 ? used : 0);
  EXPECT_EQ(threads.size(), ranges.size()) << "one range per thread";
  int index = 0;
  for (const auto& [begin, end] : ranges) {
    const auto expected = ThreadPool::Partition(n, index++, used);
    EXPECT_EQ(begin, expected.first);
    EXPECT_EQ(end, expected.second);
  }
}

TEST(ThreadPoolTest, CoversEveryIndexOnceForManySizesAndThreadCounts) {
  for (int threads : {1, 2, 3, 4, 7, 16}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 100, 1000, 12345}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, n " << n);
      CheckCoverage(pool, n);
    }
  }
}

TEST(ThreadPoolTest, DefaultSizeIsTheHardwareThreads) {
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(),
            std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

TEST(ThreadPoolTest, PartitionIsContiguousAndBalanced) {
  for (int64_t n : {1, 9, 10, 1000003}) {
    for (int t : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int i = 0; i < t; ++i) {
        const auto [b, e] = ThreadPool::Partition(n, i, t);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, n / t + 1);
        EXPECT_GE(e - b, n / t);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
}

// Many back-to-back calls, with workers that always go to sleep (spin 0)
// and with the default spin: no lost wake-ups, no deadlock.
TEST(ThreadPoolTest, RepeatedCallsNeitherDeadlockNorLoseWork) {
  for (int spin_us : {0, 100}) {
    for (int threads : {2, 3, 4}) {
      ThreadPool pool(threads, spin_us);
      std::atomic<int64_t> total{0};
      constexpr int kCalls = 5000;
      for (int call = 0; call < kCalls; ++call) {
        const int64_t n = 1 + call % 9;
        pool.ParallelFor(n, [&](int64_t b, int64_t e) {
          total.fetch_add(e - b, std::memory_order_relaxed);
        });
      }
      int64_t expected = 0;
      for (int call = 0; call < kCalls; ++call) expected += 1 + call % 9;
      EXPECT_EQ(total.load(), expected)
          << threads << " threads, spin " << spin_us;
    }
  }
}

// Calls spaced out so that workers fall asleep between them.
TEST(ThreadPoolTest, WakesSleepingWorkers) {
  ThreadPool pool(3, /*spin_us=*/10);
  for (int call = 0; call < 20; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CheckCoverage(pool, 30);
  }
}

// A slow share on one worker: the caller waits for it (its spin runs out
// and it sleeps), and nothing returns early.
TEST(ThreadPoolTest, CallerWaitsForSlowWorkers) {
  ThreadPool pool(2, /*spin_us=*/5);
  std::atomic<int> done{0};
  pool.ParallelFor(2, [&](int64_t b, int64_t) {
    if (b == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 2);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> inner_total{0};
  pool.ParallelFor(8, [&](int64_t b, int64_t e) {
    const std::thread::id outer = std::this_thread::get_id();
    pool.ParallelFor(10, [&](int64_t ib, int64_t ie) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      inner_total.fetch_add((ie - ib) * (e - b));
    });
  });
  EXPECT_EQ(inner_total.load(), 80);
}

TEST(ThreadPoolTest, OneThreadRunsInlineOnTheCaller) {
  ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.ParallelFor(100, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, DestroysCleanlyWhileWorkersSleep) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(3, /*spin_us=*/0);
    if (i % 2 == 0) CheckCoverage(pool, 10);
  }
}

}  // namespace
}  // namespace paceline::engine::cpu
