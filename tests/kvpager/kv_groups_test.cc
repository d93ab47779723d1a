// Layer groups in the pager (kv_pager.h, "layer groups"): a windowed group
// holds only the blocks its window reaches over a long generation, gives
// the rest back for others to use, takes a prompt's blocks chunk by chunk,
// copies on write per group, and a prefix hit needs every group's chain.
// Expected counts come from the window rule (position p reads [p - W + 1,
// p]), not from the pager's own formulas.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kvpager/block_lease.h"
#include "kvpager/block_table.h"
#include "kvpager/kv_pager.h"
#include "kvpager/pager_stats.h"
#include "tests/testing/pager.h"

namespace paceline::kvpager {
namespace {

using ::paceline::testing::Range;

constexpr int32_t kB = 4;       // tokens per block
constexpr int32_t kWindow = 8;  // positions a windowed layer reads

std::unique_ptr<KvPager> GroupedPager(int32_t num_blocks,
                                      std::vector<int32_t> windows) {
  absl::StatusOr<std::unique_ptr<KvPager>> pager =
      KvPager::Create(num_blocks, kB, std::move(windows));
  EXPECT_TRUE(pager.ok()) << pager.status();
  return pager.ok() ? *std::move(pager) : nullptr;
}

// The blocks a windowed group must hold once `computed` tokens are
// computed and the lease holds `tokens`: from the block of the first
// position the next one reads to the last token's block.
int32_t WindowBlocks(int32_t computed, int32_t tokens) {
  const int32_t first = std::max(0, computed - kWindow + 1) / kB;
  return (tokens - 1) / kB - first + 1;
}

void ExpectConsistent(const KvPager& pager) {
  const absl::Status s = pager.CheckConsistency();
  EXPECT_TRUE(s.ok()) << s;
}

TEST(KvGroupsTest, CreateChecksTheWindows) {
  EXPECT_EQ(KvPager::Create(16, kB, std::vector<int32_t>{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPager::Create(16, kB, {0, -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<KvPager> pager = GroupedPager(16, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  EXPECT_EQ(pager->num_groups(), 2);
  EXPECT_EQ(pager->group_window(1), kWindow);
}

TEST(KvGroupsTest, AWindowedGroupStaysBoundedOverALongGeneration) {
  std::unique_ptr<KvPager> pager = GroupedPager(400, {0, kWindow, kWindow});
  ASSERT_NE(pager, nullptr);
  absl::StatusOr<BlockLease> lease = pager->Allocate(Range(1, 3), "t");
  ASSERT_TRUE(lease.ok()) << lease.status();
  std::vector<BlockCopy> copies;
  for (int32_t n = 3; n < 300; ++n) {
    // A decode step: the last token is computed, the sampled one appended.
    ASSERT_TRUE(pager->MarkComputed(&*lease, n).ok());
    ASSERT_TRUE(pager->Append(&*lease, {7}, &copies).ok());
    const int32_t tokens = n + 1;
    EXPECT_EQ(lease->num_blocks(0), (tokens + kB - 1) / kB);
    for (int32_t g = 1; g < 3; ++g) {
      ASSERT_EQ(lease->num_blocks(g), WindowBlocks(n, tokens)) << n;
      const absl::Span<const int32_t> table = lease->group_tables()[g];
      const int32_t first = std::max(0, n - kWindow + 1) / kB;
      for (int32_t i = 0; i < static_cast<int32_t>(table.size()); ++i) {
        EXPECT_EQ(table[i] == kNoBlock, i < first) << "entry " << i;
      }
    }
    // Never more than the window and one block besides, whatever n is.
    EXPECT_LE(lease->num_blocks(1), kWindow / kB + 1);
  }
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(lease->group_tables()[0].data(), lease->block_ids().data());
  // Every held block is distinct (no block serves two groups).
  std::set<int32_t> held;
  for (const absl::Span<const int32_t> table : lease->group_tables()) {
    for (int32_t b : table) {
      if (b != kNoBlock) {
        EXPECT_TRUE(held.insert(b).second) << b;
      }
    }
  }
  ExpectConsistent(*pager);
  lease->Reset();
  const PagerStats s = pager->Stats();
  EXPECT_EQ(s.used_blocks, 0);
  EXPECT_EQ(s.free_blocks + s.cached_blocks, 400);
  pager->ResetPrefixCache();
  EXPECT_EQ(pager->Stats().free_blocks, 400);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, BlocksGivenBackServeOtherSequences) {
  // 300 tokens each: 75 blocks of full history, at most 3 windowed. Two
  // sequences fit in 160 blocks only because the windowed group gives its
  // blocks back (keeping every layer's history would take 300).
  std::unique_ptr<KvPager> pager = GroupedPager(160, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  std::vector<BlockLease> leases;
  std::vector<BlockCopy> copies;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<BlockLease> lease =
        pager->Allocate(Range(100 * i + 1, 1), "t");
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(*std::move(lease));
  }
  for (int32_t n = 1; n < 300; ++n) {
    for (BlockLease& lease : leases) {
      ASSERT_TRUE(pager->MarkComputed(&lease, n, /*cache=*/false).ok());
      ASSERT_TRUE(pager->CanAppend(lease, 1)) << n;
      ASSERT_TRUE(pager->Append(&lease, {n % 50}, &copies).ok()) << n;
    }
  }
  EXPECT_EQ(pager->Stats().used_blocks, 2 * (75 + WindowBlocks(299, 300)));
  EXPECT_EQ(pager->Stats().cached_blocks, 0);  // uncached: all freed
  leases.clear();
  EXPECT_EQ(pager->Stats().free_blocks, 160);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, APromptTakesWindowedBlocksChunkByChunk) {
  std::unique_ptr<KvPager> pager = GroupedPager(64, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  const std::vector<int32_t> prompt = Range(1, 40);
  // The first step computes 6 tokens: 2 windowed blocks, all 10 full ones.
  absl::StatusOr<BlockLease> lease = pager->Allocate(prompt, "t", 6);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->num_blocks(0), 10);
  EXPECT_EQ(lease->num_blocks(1), 2);
  EXPECT_EQ(pager->Stats().used_blocks, 12);
  ASSERT_TRUE(pager->MarkComputed(&*lease, 6).ok());
  EXPECT_EQ(lease->num_blocks(1), 2);  // position 6 reads back to 0
  // The next chunk, positions [6, 30): blocks 1..7; 0 goes once 30 is
  // computed (position 30 reads from 23, block 5).
  EXPECT_TRUE(pager->CanCover(*lease, 30));
  EXPECT_FALSE(pager->CanCover(*lease, 41));
  ASSERT_TRUE(pager->Cover(&*lease, 30).ok());
  EXPECT_EQ(lease->num_blocks(1), 8);
  ASSERT_TRUE(pager->MarkComputed(&*lease, 30).ok());
  EXPECT_EQ(lease->num_blocks(1), WindowBlocks(30, 30));
  // Covering what is held takes nothing; the rest of the prompt, 2 blocks.
  const int64_t used = pager->Stats().used_blocks;
  ASSERT_TRUE(pager->Cover(&*lease, 30).ok());
  EXPECT_EQ(pager->Stats().used_blocks, used);
  ASSERT_TRUE(pager->Cover(&*lease, 40).ok());
  EXPECT_EQ(pager->Stats().used_blocks, used + 2);
  EXPECT_EQ(pager->Cover(&*lease, 41).code(),
            absl::StatusCode::kInvalidArgument);
  // The windowed blocks recorded the prompt's tokens: the cache's keys
  // hold (CheckConsistency hashes every entry's tokens).
  ASSERT_TRUE(pager->MarkComputed(&*lease, 40).ok());
  EXPECT_EQ(pager->prefix_cache(1).size(), 10);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, APrefixHitNeedsEveryGroupsChain) {
  std::unique_ptr<KvPager> pager = GroupedPager(64, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  std::vector<int32_t> prompt = Range(1, 20);
  {
    absl::StatusOr<BlockLease> a = pager->Allocate(prompt, "t");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(pager->MarkComputed(&*a, 20).ok());
    // Position 20 reads from 13: windowed blocks 0..2 went back, cached.
    EXPECT_EQ(a->num_blocks(1), 2);
  }
  prompt.push_back(21);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 20);
  absl::StatusOr<BlockLease> b = pager->Allocate(prompt, "t");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens(), 20);
  // The hit takes the full group's five blocks and the windowed group's
  // last two (position 20 reads 13..20), plus a new block each for 20.
  EXPECT_EQ(b->num_blocks(0), 6);
  EXPECT_EQ(b->num_blocks(1), 3);
  EXPECT_EQ(b->group_tables()[1][2], kNoBlock);
  b->Reset();
  pager->ResetPrefixCache();
  // Again, and this time the windowed group's first block, given back
  // first, is evicted first: its chain no longer starts, so no group's
  // blocks can be shared.
  {
    prompt.pop_back();
    absl::StatusOr<BlockLease> a = pager->Allocate(prompt, "t");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(pager->MarkComputed(&*a, 20).ok());
    prompt.push_back(21);
  }
  ASSERT_EQ(pager->EvictCached(1), 1);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 0);
  absl::StatusOr<BlockLease> c = pager->Allocate(prompt, "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_cached_tokens(), 0);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, AHitKeepsTheWindowedChainWarm) {
  std::unique_ptr<KvPager> pager = GroupedPager(64, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  const auto compute = [&](const std::vector<int32_t>& prompt) {
    absl::StatusOr<BlockLease> lease = pager->Allocate(prompt, "t");
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(pager->MarkComputed(&*lease, lease->num_tokens()).ok());
  };
  std::vector<int32_t> p = Range(1, 20);
  compute(p);  // its windowed blocks 0..2 go back first: oldest
  const std::vector<int32_t> q = Range(300, 20);
  compute(q);  // 10 cached blocks, all newer
  p.push_back(99);
  compute(p);  // a hit on p's 20 tokens: p's old windowed blocks touched
  EXPECT_EQ(pager->Stats().cached_blocks, 20);
  // The 10 least recently used are q's now, not p's chain.
  ASSERT_EQ(pager->EvictCached(10), 10);
  EXPECT_EQ(pager->CachedPrefixTokens(p, "t"), 20);
  EXPECT_EQ(pager->CachedPrefixTokens(q, "t"), 0);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, AForkCopiesEachGroupsSharedPartialBlock) {
  std::unique_ptr<KvPager> pager = GroupedPager(32, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  absl::StatusOr<BlockLease> a = pager->Allocate(Range(1, 14), "t");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pager->MarkComputed(&*a, 14).ok());
  absl::StatusOr<BlockLease> b = pager->Fork(*a);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_blocks(), a->num_blocks());
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(pager->CanAppend(*b, 1));
  ASSERT_TRUE(pager->Append(&*b, {99}, &copies).ok());
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, a->group_tables()[0][3]);
  EXPECT_EQ(copies[1].src, a->group_tables()[1][3]);
  EXPECT_EQ(copies[0].dst, b->group_tables()[0][3]);
  EXPECT_EQ(copies[1].dst, b->group_tables()[1][3]);
  // The shared full blocks stay shared.
  EXPECT_EQ(a->group_tables()[1][2], b->group_tables()[1][2]);
  EXPECT_EQ(pager->pool().ref_count(a->group_tables()[1][2]), 2);
  a->Reset();
  b->Reset();
  EXPECT_EQ(pager->Stats().used_blocks, 0);
  ExpectConsistent(*pager);
}

TEST(KvGroupsTest, TruncateGivesBackRejectedDraftsInEveryGroup) {
  std::unique_ptr<KvPager> pager = GroupedPager(32, {0, kWindow});
  ASSERT_NE(pager, nullptr);
  absl::StatusOr<BlockLease> a = pager->Allocate(Range(1, 12), "t");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pager->MarkComputed(&*a, 12).ok());
  const int64_t used = pager->Stats().used_blocks;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&*a, Range(50, 6), &copies).ok());  // 13 + 5
  EXPECT_EQ(pager->Stats().used_blocks, used + 2 * 2);
  ASSERT_TRUE(pager->MarkComputed(&*a, 14).ok());
  ASSERT_TRUE(pager->Truncate(&*a, 14).ok());
  EXPECT_EQ(a->num_tokens(), 14);
  EXPECT_EQ(a->num_blocks(0), 4);
  EXPECT_EQ(a->num_blocks(1), WindowBlocks(14, 14));
  EXPECT_EQ(pager->AppendRoom(*a, 4), 2 + 2 * kB);
  ExpectConsistent(*pager);
}


// Random operations on a pager of a full and two windowed groups (as the
// scheduler makes them: a chunk covered before it is computed, decode
// tokens appended, forks of computed sequences, drafts truncated), checked
// after each against a model of the live sequences: every block's
// refcount is the number of tables holding it; a windowed table holds
// exactly the blocks from its window's first to its covered end; each
// held block records its sequence's tokens; and, all freed, nothing is
// used.
TEST(KvGroupsTest, RandomOperationsKeepTheInvariants) {
  struct Seq {
    BlockLease lease;
    std::vector<int32_t> tokens;
    int32_t covered = 0;  // positions the windowed groups were asked for
  };
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const auto uniform = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };
    std::unique_ptr<KvPager> pager = GroupedPager(120, {0, kWindow, 5});
    ASSERT_NE(pager, nullptr);
    std::vector<Seq> seqs;
    std::vector<BlockCopy> copies;
    for (int step = 0; step < 400; ++step) {
      const int dice = uniform(0, 99);
      if (dice < 20 || seqs.empty()) {
        std::vector<int32_t> prompt = Range(uniform(0, 2) * 100, uniform(1, 30));
        const int32_t first = uniform(0, 12);
        if (!pager->CanAllocate(prompt, "t", first)) continue;
        absl::StatusOr<BlockLease> lease = pager->Allocate(prompt, "t", first);
        ASSERT_TRUE(lease.ok()) << lease.status();
        const int32_t cached = lease->num_cached_tokens();
        const int32_t covered = std::min<int32_t>(
            static_cast<int32_t>(prompt.size()), cached + first);
        seqs.push_back(Seq{*std::move(lease), std::move(prompt), covered});
        continue;
      }
      Seq& q = seqs[uniform(0, static_cast<int>(seqs.size()) - 1)];
      const int32_t computed = q.lease.num_computed_tokens();
      const int32_t n = q.lease.num_tokens();
      if (dice < 50) {  // a step: cover a chunk, or append past the end
        if (q.covered < n) {
          const int32_t end = std::min(n, computed + uniform(1, 9));
          if (!pager->CanCover(q.lease, end)) continue;
          ASSERT_TRUE(pager->Cover(&q.lease, end).ok());
          q.covered = std::max(q.covered, end);
        } else if (computed == n) {
          const int32_t k = uniform(1, 4);
          std::vector<int32_t> more = Range(uniform(0, 500), k);
          if (!pager->CanAppend(q.lease, k)) continue;
          ASSERT_TRUE(pager->Append(&q.lease, more, &copies).ok());
          q.tokens.insert(q.tokens.end(), more.begin(), more.end());
          q.covered = q.lease.num_tokens();
        }
      } else if (dice < 75) {  // the step ran: some of it is computed
        const int32_t to = uniform(computed, q.covered);
        ASSERT_TRUE(pager->MarkComputed(&q.lease, to).ok());
        if (uniform(0, 3) == 0 && to < q.lease.num_tokens()) {
          // Drafts rejected: drop the uncomputed tail.
          ASSERT_TRUE(pager->Truncate(&q.lease, to).ok());
          q.tokens.resize(to);
          q.covered = to;
        }
      } else if (dice < 82) {
        if (computed != n) continue;  // fork only computed sequences
        absl::StatusOr<BlockLease> fork = pager->Fork(q.lease);
        ASSERT_TRUE(fork.ok());
        Seq copy{*std::move(fork), q.tokens, q.covered};
        seqs.push_back(std::move(copy));
      } else if (dice < 95) {
        seqs.erase(seqs.begin() + uniform(0, static_cast<int>(seqs.size()) - 1));
      } else {
        pager->EvictCached(uniform(1, 5));
      }
      // The model.
      ExpectConsistent(*pager);
      std::vector<int32_t> refs(120, 0);
      for (const Seq& s : seqs) {
        const int32_t c = s.lease.num_computed_tokens();
        ASSERT_EQ(s.lease.num_tokens(), static_cast<int32_t>(s.tokens.size()));
        for (int32_t g = 0; g < 3; ++g) {
          const absl::Span<const int32_t> table = s.lease.group_tables()[g];
          const int32_t w = pager->group_window(g);
          const int32_t first = w == 0 ? 0 : std::max(0, c - w + 1) / kB;
          const int32_t end =
              w == 0 ? static_cast<int32_t>(table.size())
                     : (std::max(s.covered, c) + kB - 1) / kB;
          for (int32_t i = 0; i < static_cast<int32_t>(table.size()); ++i) {
            const bool held = i >= first && i < end;
            ASSERT_EQ(table[i] != kNoBlock, held)
                << "group " << g << " entry " << i << " computed " << c;
            if (!held) continue;
            ++refs[table[i]];
            const int32_t stop = std::min<int32_t>(
                kB, static_cast<int32_t>(s.tokens.size()) - i * kB);
            for (int32_t j = 0; j < stop; ++j) {
              ASSERT_EQ(pager->pool().tokens(table[i])[j], s.tokens[i * kB + j]);
            }
          }
        }
      }
      for (int32_t b = 0; b < 120; ++b) {
        ASSERT_EQ(pager->pool().ref_count(b), refs[b]) << "block " << b;
      }
    }
    seqs.clear();
    EXPECT_EQ(pager->Stats().used_blocks, 0);
    pager->ResetPrefixCache();
    EXPECT_EQ(pager->Stats().free_blocks, 120);
  }
}

}  // namespace
}  // namespace paceline::kvpager
