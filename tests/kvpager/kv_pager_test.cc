// The pager facade: block tables, check/act pairs, growth one block at a
// time, lease ownership, copy-on-write forks, exhaustion without partial
// effects, and exact stats.

#include "kvpager/kv_pager.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kvpager/block_lease.h"
#include "kvpager/block_table.h"
#include "kvpager/pager_stats.h"
#include "tests/testing/pager.h"

namespace paceline::kvpager {
namespace {

using ::paceline::testing::MakePager;
using ::paceline::testing::Range;

constexpr int32_t kB = 4;

std::vector<int32_t> Ids(const BlockLease& lease) {
  return std::vector<int32_t>(lease.block_ids().begin(),
                              lease.block_ids().end());
}

void ExpectBlocks(const KvPager& pager, int64_t free, int64_t used,
                  int64_t cached) {
  const PagerStats s = pager.Stats();
  EXPECT_EQ(s.free_blocks, free);
  EXPECT_EQ(s.used_blocks, used);
  EXPECT_EQ(s.cached_blocks, cached);
  EXPECT_EQ(s.total_blocks, free + used + cached);
  EXPECT_TRUE(pager.CheckConsistency().ok()) << pager.CheckConsistency();
}

TEST(KvPagerTest, CreateValidatesTheShape) {
  EXPECT_EQ(KvPager::Create(0, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPager::Create(16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPager::Create(-1, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPager::Create(int32_t{1} << 28, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<KvPager>> pager = KvPager::Create(100, 16);
  ASSERT_TRUE(pager.ok());
  EXPECT_EQ((*pager)->num_blocks(), 100);
  EXPECT_EQ((*pager)->block_size(), 16);
  EXPECT_EQ((*pager)->Stats().block_size, 16);
  ExpectBlocks(**pager, 100, 0, 0);
}

TEST(KvPagerTest, AllocateCoversThePrompt) {
  auto pager = MakePager(10, kB);
  absl::StatusOr<BlockLease> lease = pager->Allocate(Range(0, 10), "t");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->empty());
  EXPECT_EQ(lease->num_tokens(), 10);
  EXPECT_EQ(lease->num_cached_tokens(), 0);
  EXPECT_EQ(Ids(*lease), (std::vector<int32_t>{0, 1, 2}));
  const BlockTable table = lease->table();
  EXPECT_EQ(table.block_size, kB);
  EXPECT_EQ(table.num_tokens, 10);
  EXPECT_EQ(table.num_blocks(), 3);
  EXPECT_EQ(table.Slot(0), 0);
  EXPECT_EQ(table.Slot(5), 5);
  EXPECT_EQ(table.Slot(9), 9);
  // The pool records the tokens each block holds.
  EXPECT_EQ(pager->pool().tokens(2)[1], 9);
  ExpectBlocks(*pager, 7, 3, 0);

  EXPECT_EQ(pager->Allocate({}, "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pager->CanAllocate({}, "t"));
}

TEST(KvPagerTest, SlotsFollowTheTable) {
  auto pager = MakePager(10, kB);
  absl::StatusOr<BlockLease> first = pager->Allocate(Range(0, 5), "t");
  absl::StatusOr<BlockLease> second = pager->Allocate(Range(0, 6), "u");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(Ids(*second), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(second->table().Slot(0), 8);
  EXPECT_EQ(second->table().Slot(5), 13);
}

TEST(KvPagerTest, AppendTakesABlockOnlyWhenTheLastFills) {
  auto pager = MakePager(10, kB);
  absl::StatusOr<BlockLease> lease = pager->Allocate({1, 2, 3}, "t");
  ASSERT_TRUE(lease.ok());
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(pager->CanAppend(*lease, 1));
  ASSERT_TRUE(pager->Append(&*lease, {4}, &copies).ok());
  EXPECT_EQ(lease->num_tokens(), 4);
  EXPECT_EQ(lease->num_blocks(), 1);
  ASSERT_TRUE(pager->Append(&*lease, {5}, &copies).ok());
  EXPECT_EQ(lease->num_tokens(), 5);
  EXPECT_EQ(lease->num_blocks(), 2);
  for (int32_t t = 6; t <= 8; ++t) {
    ASSERT_TRUE(pager->Append(&*lease, {t}, &copies).ok());
    EXPECT_EQ(lease->num_blocks(), 2);
  }
  // Several tokens at once cross two boundaries.
  ASSERT_TRUE(pager->Append(&*lease, Range(9, 6), &copies).ok());
  EXPECT_EQ(lease->num_tokens(), 14);
  EXPECT_EQ(Ids(*lease), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pager->pool().tokens(3)[1], 14);
  // Appending nothing is a no-op.
  ASSERT_TRUE(pager->Append(&*lease, {}, &copies).ok());
  EXPECT_EQ(lease->num_tokens(), 14);
  EXPECT_TRUE(copies.empty());
  ExpectBlocks(*pager, 6, 4, 0);
}

TEST(KvPagerTest, TruncateDropsTheUncomputedTailAndItsBlocks) {
  auto pager = MakePager(10, kB);
  absl::StatusOr<BlockLease> lease = pager->Allocate(Range(1, 6), "t");
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(pager->MarkComputed(&*lease, 6).ok());
  // Six draft-like tokens: positions 6..11, into a third block.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&*lease, Range(7, 6), &copies).ok());
  EXPECT_EQ(lease->num_blocks(), 3);
  ExpectBlocks(*pager, 7, 3, 0);
  // Below what is computed: refused, nothing changes.
  EXPECT_EQ(pager->Truncate(&*lease, 5).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->Truncate(&*lease, 13).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lease->num_tokens(), 12);
  // Keep two of them: the third block goes back to the free list.
  ASSERT_TRUE(pager->Truncate(&*lease, 8).ok());
  EXPECT_EQ(lease->num_tokens(), 8);
  EXPECT_EQ(lease->num_blocks(), 2);
  ExpectBlocks(*pager, 8, 2, 0);
  // Growth continues from the kept length; the slot after it is rewritten.
  ASSERT_TRUE(pager->Append(&*lease, {42}, &copies).ok());
  EXPECT_EQ(lease->num_tokens(), 9);
  EXPECT_EQ(pager->pool().tokens(lease->block_ids()[2])[0], 42);
  ASSERT_TRUE(pager->MarkComputed(&*lease, 9).ok());
  EXPECT_TRUE(copies.empty());
  ExpectBlocks(*pager, 7, 3, 0);
  // Truncating to what is there, or to the computed length, is allowed.
  EXPECT_TRUE(pager->Truncate(&*lease, 9).ok());
  BlockLease empty;
  EXPECT_EQ(pager->Truncate(&empty, 0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvPagerTest, TheLeaseOwnsItsBlocks) {
  auto pager = MakePager(10, kB);
  {
    absl::StatusOr<BlockLease> lease = pager->Allocate(Range(0, 9), "t");
    ASSERT_TRUE(lease.ok());
    ExpectBlocks(*pager, 7, 3, 0);
  }
  ExpectBlocks(*pager, 10, 0, 0);

  BlockLease a = *pager->Allocate(Range(0, 9), "t");
  BlockLease moved = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): by contract
  EXPECT_EQ(a.num_blocks(), 0);
  EXPECT_EQ(moved.num_blocks(), 3);
  a.Reset();  // an empty lease releases nothing
  ExpectBlocks(*pager, 7, 3, 0);

  // Assigning over a live lease releases its blocks first.
  moved = *pager->Allocate(Range(0, 2), "t");
  ExpectBlocks(*pager, 9, 1, 0);
  pager->Free(std::move(moved));
  ExpectBlocks(*pager, 10, 0, 0);

  // A lease of one pager is refused by another.
  auto other = MakePager(4, kB);
  BlockLease foreign = *other->Allocate({1}, "t");
  std::vector<BlockCopy> copies;
  EXPECT_EQ(pager->Append(&foreign, {2}, &copies).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->MarkComputed(&foreign, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->Fork(foreign).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pager->CanAppend(foreign, 1));
  BlockLease empty;
  EXPECT_EQ(pager->Append(&empty, {2}, &copies).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pager->CanAppend(empty, 0));
}

TEST(KvPagerTest, ArgumentsAreChecked) {
  auto pager = MakePager(4, kB);
  BlockLease lease = *pager->Allocate({1, 2, 3}, "t");
  EXPECT_EQ(pager->MarkComputed(&lease, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->MarkComputed(&lease, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->Append(&lease, {4}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pager->CanAppend(lease, -1));
  EXPECT_FALSE(pager->CanAppend(lease, KvPager::kMaxSequenceTokens));
  EXPECT_EQ(lease.num_tokens(), 3);
}

TEST(KvPagerTest, ExhaustionNeverHalfSucceeds) {
  auto pager = MakePager(4, kB);
  EXPECT_FALSE(pager->CanAllocate(Range(0, 17), "t"));
  EXPECT_EQ(pager->Allocate(Range(0, 17), "t").status().code(),
            absl::StatusCode::kResourceExhausted);
  ExpectBlocks(*pager, 4, 0, 0);
  EXPECT_EQ(pager->Stats().prefix_queries, 0);

  EXPECT_TRUE(pager->CanAllocate(Range(0, 16), "t"));
  BlockLease full = *pager->Allocate(Range(0, 16), "t");
  ExpectBlocks(*pager, 0, 4, 0);
  EXPECT_FALSE(pager->CanAllocate({1}, "t"));
  EXPECT_FALSE(pager->CanAppend(full, 1));
  EXPECT_TRUE(pager->CanAppend(full, 0));
  std::vector<BlockCopy> copies;
  EXPECT_EQ(pager->Append(&full, {16}, &copies).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.num_tokens(), 16);
  EXPECT_EQ(full.num_blocks(), 4);
  EXPECT_TRUE(copies.empty());
  ExpectBlocks(*pager, 0, 4, 0);
}

TEST(KvPagerTest, EvictableBlocksCountAsAvailable) {
  auto pager = MakePager(4, kB);
  const std::vector<int32_t> a = Range(0, 8);
  {
    BlockLease lease = *pager->Allocate(a, "t");
    ASSERT_TRUE(pager->MarkComputed(&lease, 8).ok());
  }
  ExpectBlocks(*pager, 2, 0, 2);
  // 4 new blocks: 2 free + 2 evicted.
  EXPECT_TRUE(pager->CanAllocate(Range(100, 16), "t"));
  // a + 8 more: 2 hits, 2 new; the hits are not available twice.
  std::vector<int32_t> a16 = a;
  for (int32_t t : Range(100, 8)) a16.push_back(t);
  EXPECT_TRUE(pager->CanAllocate(a16, "t"));
  // a + 9 more: 2 hits, 3 new, but only the 2 free blocks remain.
  std::vector<int32_t> a17 = a16;
  a17.push_back(7);
  EXPECT_FALSE(pager->CanAllocate(a17, "t"));
  const std::vector<int32_t> lru = pager->pool().CachedInLruOrder();
  EXPECT_EQ(pager->Allocate(a17, "t").status().code(),
            absl::StatusCode::kResourceExhausted);
  // Nothing moved: the hits were not taken, nothing was evicted.
  ExpectBlocks(*pager, 2, 0, 2);
  EXPECT_EQ(pager->pool().CachedInLruOrder(), lru);
  EXPECT_EQ(pager->Stats().evictions, 0);

  absl::StatusOr<BlockLease> lease = pager->Allocate(a16, "t");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->num_cached_tokens(), 8);
  ExpectBlocks(*pager, 0, 4, 0);
  EXPECT_EQ(pager->Stats().evictions, 0);
  lease->Reset();
  // Now 4 fresh blocks need both cached ones evicted.
  ExpectBlocks(*pager, 2, 0, 2);
  ASSERT_TRUE(pager->Allocate(Range(100, 16), "t").ok());
  EXPECT_EQ(pager->Stats().evictions, 2);
  EXPECT_EQ(pager->CachedPrefixTokens(a16, "t"), 0);
}

TEST(KvPagerTest, AnAllocationNeverEvictsItsOwnHits) {
  auto pager = MakePager(5, kB);
  const std::vector<int32_t> x = Range(0, 8);
  {
    BlockLease lz = *pager->Allocate(Range(50, 5), "t");
    ASSERT_TRUE(pager->MarkComputed(&lz, 5).ok());
    BlockLease lx = *pager->Allocate(x, "t");
    ASSERT_TRUE(pager->MarkComputed(&lx, 8).ok());
  }  // lx goes first, then lz: x's blocks are the least recently used
  const std::vector<int32_t> lru = pager->pool().CachedInLruOrder();
  ASSERT_EQ(lru.size(), 3u);
  ExpectBlocks(*pager, 2, 0, 3);
  // x + 12 tokens: 5 blocks, x's 2 hit, 3 new = 2 free + 1 evicted. The
  // hits are taken before any eviction, so the evicted block is z's, not
  // the least recently used one.
  std::vector<int32_t> prompt = x;
  for (int32_t t : Range(100, 12)) prompt.push_back(t);
  absl::StatusOr<BlockLease> lease = pager->Allocate(prompt, "t");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->num_cached_tokens(), 8);
  EXPECT_EQ(lease->block_ids()[0], lru[1]);
  EXPECT_EQ(lease->block_ids()[1], lru[0]);
  EXPECT_EQ(pager->pool().tokens(lease->block_ids()[1])[3], 7);
  EXPECT_EQ(pager->Stats().evictions, 1);
  EXPECT_EQ(pager->CachedPrefixTokens(Range(50, 5), "t"), 0);
  ExpectBlocks(*pager, 0, 5, 0);
}

TEST(KvPagerTest, ForkSharesAndTheFirstWriteCopies) {
  auto pager = MakePager(10, kB);
  BlockLease parent = *pager->Allocate(Range(10, 6), "t");  // 4 + 2 tokens
  ASSERT_TRUE(pager->MarkComputed(&parent, 6).ok());
  absl::StatusOr<BlockLease> child = pager->Fork(parent);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(Ids(*child), Ids(parent));
  EXPECT_EQ(child->num_tokens(), 6);
  EXPECT_EQ(child->num_computed_tokens(), 6);
  const int32_t full = parent.block_ids()[0];
  const int32_t partial = parent.block_ids()[1];
  EXPECT_EQ(pager->pool().ref_count(full), 2);
  EXPECT_EQ(pager->pool().ref_count(partial), 2);
  ExpectBlocks(*pager, 8, 2, 0);

  // The child's first write into the shared partial block copies it.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&*child, {99}, &copies).ok());
  ASSERT_EQ(copies.size(), 1u);
  const int32_t copy = child->block_ids()[1];
  EXPECT_EQ(copies[0], (BlockCopy{partial, copy}));
  EXPECT_NE(copy, partial);
  EXPECT_EQ(child->block_ids()[0], full);
  EXPECT_EQ(pager->pool().ref_count(full), 2);
  EXPECT_EQ(pager->pool().ref_count(partial), 1);
  EXPECT_EQ(pager->pool().ref_count(copy), 1);
  EXPECT_EQ(pager->pool().tokens(copy)[0], 14);
  EXPECT_EQ(pager->pool().tokens(copy)[1], 15);
  EXPECT_EQ(pager->pool().tokens(copy)[2], 99);
  // The parent's view is unchanged.
  EXPECT_EQ(Ids(parent), (std::vector<int32_t>{full, partial}));
  EXPECT_EQ(parent.num_tokens(), 6);
  EXPECT_EQ(pager->pool().tokens(partial)[0], 14);
  EXPECT_EQ(pager->pool().tokens(partial)[1], 15);
  EXPECT_EQ(pager->Stats().cow_copies, 1);

  // The parent now owns its partial block alone: no copy.
  copies.clear();
  ASSERT_TRUE(pager->Append(&parent, {42}, &copies).ok());
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(pager->pool().tokens(partial)[2], 42);
  EXPECT_EQ(pager->pool().tokens(copy)[2], 99);
  EXPECT_EQ(pager->Stats().cow_copies, 1);
  ExpectBlocks(*pager, 7, 3, 0);

  // Freeing the parent leaves the child whole.
  parent.Reset();
  EXPECT_EQ(pager->pool().ref_count(full), 1);
  ExpectBlocks(*pager, 8, 2, 0);
}

TEST(KvPagerTest, ForkAtABlockBoundaryNeedsNoCopy) {
  auto pager = MakePager(10, kB);
  BlockLease parent = *pager->Allocate(Range(0, 8), "t");
  BlockLease child = *pager->Fork(parent);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&child, {1}, &copies).ok());
  ASSERT_TRUE(pager->Append(&parent, {2}, &copies).ok());
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.num_blocks(), 3);
  EXPECT_NE(child.block_ids()[2], parent.block_ids()[2]);
  EXPECT_EQ(pager->Stats().cow_copies, 0);
}

TEST(KvPagerTest, CanAppendCountsTheCopy) {
  auto pager = MakePager(3, kB);
  BlockLease parent = *pager->Allocate(Range(0, 6), "t");  // 2 blocks
  BlockLease child = *pager->Fork(parent);
  // One block left: enough for the copy plus 2 tokens in it, not 3.
  EXPECT_TRUE(pager->CanAppend(child, 2));
  EXPECT_FALSE(pager->CanAppend(child, 3));
  std::vector<BlockCopy> copies;
  EXPECT_EQ(pager->Append(&child, {1, 2, 3}, &copies).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(Ids(child), Ids(parent));
  ASSERT_TRUE(pager->Append(&child, {1, 2}, &copies).ok());
  EXPECT_EQ(copies.size(), 1u);
  ExpectBlocks(*pager, 0, 3, 0);
}

class RecordingObserver : public PagerObserver {
 public:
  void OnPrefixQuery(int64_t query_tokens, int64_t hit_tokens) override {
    queries.push_back({query_tokens, hit_tokens});
  }
  void OnEviction(int64_t blocks) override { evicted += blocks; }
  void OnCopyOnWrite() override { ++cow; }

  std::vector<std::pair<int64_t, int64_t>> queries;
  int64_t evicted = 0;
  int64_t cow = 0;
};

TEST(KvPagerTest, StatsAndObserverCountExactly) {
  auto pager = MakePager(4, kB);
  RecordingObserver observer;
  pager->set_observer(&observer);
  BlockLease a = *pager->Allocate(Range(0, 6), "t");
  ASSERT_TRUE(pager->MarkComputed(&a, 6).ok());
  BlockLease b = *pager->Allocate(Range(0, 7), "t");  // hits block 0
  BlockLease c = *pager->Fork(b);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&c, {1}, &copies).ok());  // copy-on-write
  a.Reset();
  b.Reset();
  c.Reset();
  // Blocks: a's block 0 is cached, everything else free.
  ExpectBlocks(*pager, 3, 0, 1);
  EXPECT_EQ(pager->CachedPrefixTokens(Range(0, 6), "t"), 4);  // not counted
  EXPECT_EQ(pager->EvictCached(5), 1);

  const PagerStats s = pager->Stats();
  EXPECT_EQ(s.prefix_queries, 2);
  EXPECT_EQ(s.prefix_query_tokens, 13);
  EXPECT_EQ(s.prefix_hit_tokens, 4);
  EXPECT_EQ(s.cow_copies, 1);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(observer.queries,
            (std::vector<std::pair<int64_t, int64_t>>{{6, 0}, {7, 4}}));
  EXPECT_EQ(observer.cow, 1);
  EXPECT_EQ(observer.evicted, 1);
  pager->set_observer(nullptr);
}

}  // namespace
}  // namespace paceline::kvpager
