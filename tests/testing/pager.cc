#include "tests/testing/pager.h"

#include <numeric>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace paceline::testing {

std::unique_ptr<kvpager::KvPager> MakePager(int32_t num_blocks,
                                            int32_t block_size) {
  absl::StatusOr<std::unique_ptr<kvpager::KvPager>> pager =
      kvpager::KvPager::Create(num_blocks, block_size);
  EXPECT_TRUE(pager.ok()) << pager.status();
  if (!pager.ok()) return nullptr;
  return *std::move(pager);
}

std::vector<int32_t> Range(int32_t first, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace paceline::testing
