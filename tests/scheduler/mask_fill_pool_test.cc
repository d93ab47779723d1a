// MaskFillPool: every job of a batch runs exactly once before Wait
// returns, whatever the number of workers (0: all in Wait).

#include "scheduler/mask_fill_pool.h"

#include <atomic>
#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::scheduler {
namespace {

TEST(MaskFillPoolTest, EveryJobRunsOnceBeforeWaitReturns) {
  for (int threads : {0, 1, 3}) {
    MaskFillPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int batch = 0; batch < 50; ++batch) {
      std::vector<int> runs(batch % 7, 0);  // some batches are empty
      std::vector<std::function<void()>> jobs;
      for (int& r : runs) jobs.push_back([&r] { ++r; });
      pool.Start(std::move(jobs));
      pool.Wait();
      pool.Wait();  // idempotent
      for (int r : runs) EXPECT_EQ(r, 1) << threads << " threads";
    }
  }
}

TEST(MaskFillPoolTest, WaitWithoutStartReturns) {
  MaskFillPool pool(2);
  pool.Wait();
}

}  // namespace
}  // namespace paceline::scheduler
