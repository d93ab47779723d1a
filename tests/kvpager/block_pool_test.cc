// The block pool's state machine: free -> used -> free or cached, the LRU
// order of cached blocks, and the counts that always add up.

#include "kvpager/block_pool.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::kvpager {
namespace {

void ExpectCounts(const BlockPool& pool, int32_t free, int32_t used,
                  int32_t cached) {
  EXPECT_EQ(pool.num_free(), free);
  EXPECT_EQ(pool.num_used(), used);
  EXPECT_EQ(pool.num_cached(), cached);
  EXPECT_EQ(pool.num_available(), free + cached);
  EXPECT_EQ(free + used + cached, pool.num_blocks());
  EXPECT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency();
}

TEST(BlockPoolTest, StartsFreeAndHandsOutIdsInOrder) {
  BlockPool pool(4, 16);
  EXPECT_EQ(pool.num_blocks(), 4);
  EXPECT_EQ(pool.block_size(), 16);
  ExpectCounts(pool, 4, 0, 0);
  EXPECT_EQ(pool.PopFree(), 0);
  EXPECT_EQ(pool.PopFree(), 1);
  EXPECT_EQ(pool.state(0), BlockState::kUsed);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.state(2), BlockState::kFree);
  EXPECT_EQ(pool.ref_count(2), 0);
  ExpectCounts(pool, 2, 2, 0);
}

TEST(BlockPoolTest, RefCountsAndReleaseToFree) {
  BlockPool pool(3, 4);
  const int32_t b = pool.PopFree();
  pool.AddRef(b);
  pool.AddRef(b);
  EXPECT_EQ(pool.ref_count(b), 3);
  pool.Release(b);
  pool.Release(b);
  EXPECT_EQ(pool.state(b), BlockState::kUsed);
  ExpectCounts(pool, 2, 1, 0);
  pool.Release(b);
  EXPECT_EQ(pool.state(b), BlockState::kFree);
  ExpectCounts(pool, 3, 0, 0);
  // Last freed, first reused (a stack).
  EXPECT_EQ(pool.PopFree(), b);
}

TEST(BlockPoolTest, RegisteredBlocksAreCachedInLruOrder) {
  BlockPool pool(5, 4);
  std::vector<int32_t> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(pool.PopFree());
    pool.SetRegistered(blocks.back(), true);
  }
  pool.Release(blocks[2]);
  pool.Release(blocks[0]);
  pool.Release(blocks[3]);
  EXPECT_EQ(pool.state(blocks[0]), BlockState::kCached);
  EXPECT_EQ(pool.CachedInLruOrder(),
            (std::vector<int32_t>{blocks[2], blocks[0], blocks[3]}));
  ExpectCounts(pool, 1, 1, 3);

  // A hit takes a cached block back (it leaves the LRU list); releasing it
  // again makes it the most recently used.
  pool.AddRef(blocks[2]);
  EXPECT_EQ(pool.state(blocks[2]), BlockState::kUsed);
  ExpectCounts(pool, 1, 2, 2);
  pool.Release(blocks[2]);
  EXPECT_EQ(pool.CachedInLruOrder(),
            (std::vector<int32_t>{blocks[0], blocks[3], blocks[2]}));

  // Eviction takes the least recently used, still marked registered.
  EXPECT_EQ(pool.PopLeastRecentlyUsed(), blocks[0]);
  EXPECT_EQ(pool.state(blocks[0]), BlockState::kUsed);
  EXPECT_EQ(pool.ref_count(blocks[0]), 1);
  EXPECT_TRUE(pool.registered(blocks[0]));
  pool.SetRegistered(blocks[0], false);
  pool.Release(blocks[0]);
  EXPECT_EQ(pool.state(blocks[0]), BlockState::kFree);
  ExpectCounts(pool, 2, 1, 2);
}

TEST(BlockPoolTest, UnregisteringACachedBlockFreesIt) {
  BlockPool pool(2, 4);
  const int32_t b = pool.PopFree();
  pool.SetRegistered(b, true);
  pool.Release(b);
  ExpectCounts(pool, 1, 0, 1);
  pool.SetRegistered(b, false);
  EXPECT_EQ(pool.state(b), BlockState::kFree);
  EXPECT_TRUE(pool.CachedInLruOrder().empty());
  ExpectCounts(pool, 2, 0, 0);
}

TEST(BlockPoolTest, TokensArePerBlock) {
  BlockPool pool(3, 4);
  pool.tokens(1)[0] = 7;
  pool.tokens(1)[3] = 9;
  EXPECT_EQ(pool.tokens(1).size(), 4u);
  EXPECT_EQ(pool.tokens(1)[0], 7);
  EXPECT_EQ(pool.tokens(1)[3], 9);
  EXPECT_EQ(pool.tokens(0)[3], 0);
  EXPECT_EQ(pool.tokens(2)[0], 0);
}

}  // namespace
}  // namespace paceline::kvpager
