// The prefix cache through the pager: hits need the same tokens and salt,
// a difference in any block stops the chain there, the last prompt token is
// always computed, eviction is LRU and takes the key with it.

#include "kvpager/prefix_cache.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kvpager/block_hash.h"
#include "kvpager/kv_pager.h"
#include "tests/testing/pager.h"

namespace paceline::kvpager {
namespace {

using ::paceline::testing::MakePager;
using ::paceline::testing::Range;

constexpr int32_t kB = 4;  // block size in these tests

std::vector<int32_t> Concat(std::vector<int32_t> a,
                            const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Allocates `prompt` and marks it all computed.
BlockLease Admit(KvPager& pager, const std::vector<int32_t>& prompt,
                 absl::string_view salt) {
  absl::StatusOr<BlockLease> lease = pager.Allocate(prompt, salt);
  EXPECT_TRUE(lease.ok()) << lease.status();
  if (!lease.ok()) return BlockLease();
  EXPECT_TRUE(pager.MarkComputed(&*lease, lease->num_tokens()).ok());
  return std::move(*lease);
}

// The key of block `index` of `tokens` under `salt`.
BlockKey KeyOf(const std::vector<int32_t>& tokens, int index,
               absl::string_view salt) {
  BlockKey key = kRootBlockKey;
  for (int i = 0; i <= index; ++i) {
    key = HashBlock(key, HashSalt(salt),
                    absl::MakeConstSpan(tokens).subspan(i * kB, kB));
  }
  return key;
}

void ExpectConsistent(const KvPager& pager) {
  EXPECT_TRUE(pager.CheckConsistency().ok()) << pager.CheckConsistency();
}

TEST(PrefixCacheTest, SamePromptAndSaltHits) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> prompt = Range(100, 13);  // 3 full blocks + 1
  BlockLease a = Admit(*pager, prompt, "tenant-a");
  EXPECT_EQ(a.num_cached_tokens(), 0);
  EXPECT_EQ(pager->prefix_cache().size(), 3);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "tenant-a"), 12);

  absl::StatusOr<BlockLease> b = pager->Allocate(prompt, "tenant-a");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_cached_tokens(), 12);
  EXPECT_EQ(b->num_computed_tokens(), 12);
  ASSERT_EQ(b->num_blocks(), 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b->block_ids()[i], a.block_ids()[i]);
    EXPECT_EQ(pager->pool().ref_count(a.block_ids()[i]), 2);
  }
  EXPECT_NE(b->block_ids()[3], a.block_ids()[3]);
  EXPECT_EQ(pager->pool().ref_count(b->block_ids()[3]), 1);

  const PagerStats stats = pager->Stats();
  EXPECT_EQ(stats.prefix_queries, 2);
  EXPECT_EQ(stats.prefix_query_tokens, 26);
  EXPECT_EQ(stats.prefix_hit_tokens, 12);
  EXPECT_EQ(stats.used_blocks, 5);
  ExpectConsistent(*pager);
}

TEST(PrefixCacheTest, NothingIsCachedBeforeItIsComputed) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> prompt = Range(0, 13);
  absl::StatusOr<BlockLease> a = pager->Allocate(prompt, "t");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 0);
  // A prefill chunk of 6 tokens completes block 0 only.
  ASSERT_TRUE(pager->MarkComputed(&*a, 6).ok());
  EXPECT_EQ(a->num_computed_tokens(), 6);
  EXPECT_EQ(pager->prefix_cache().size(), 1);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 4);
  // A smaller count later is a no-op.
  ASSERT_TRUE(pager->MarkComputed(&*a, 2).ok());
  EXPECT_EQ(a->num_computed_tokens(), 6);
  ASSERT_TRUE(pager->MarkComputed(&*a, 13).ok());
  EXPECT_EQ(pager->prefix_cache().size(), 3);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 12);
  // Preempting a sequence mid-prefill leaves only its computed blocks.
  const std::vector<int32_t> other = Range(50, 13);
  absl::StatusOr<BlockLease> c = pager->Allocate(other, "t");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(pager->MarkComputed(&*c, 4).ok());
  c->Reset();
  EXPECT_EQ(pager->CachedPrefixTokens(other, "t"), 4);
  EXPECT_EQ(pager->Stats().cached_blocks, 1);
  ExpectConsistent(*pager);
}

TEST(PrefixCacheTest, DifferentSaltMisses) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> prompt = Range(7, 9);
  BlockLease a = Admit(*pager, prompt, "tenant-a");
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "tenant-a"), 8);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "tenant-b"), 0);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, ""), 0);
  absl::StatusOr<BlockLease> b = pager->Allocate(prompt, "tenant-b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_NE(b->block_ids()[i], a.block_ids()[i]);
  // Both tenants' blocks are cached, each under its own key.
  ASSERT_TRUE(pager->MarkComputed(&*b, 9).ok());
  EXPECT_EQ(pager->prefix_cache().size(), 4);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(prompt, 1, "tenant-a")),
            a.block_ids()[1]);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(prompt, 1, "tenant-b")),
            b->block_ids()[1]);
  ExpectConsistent(*pager);
}

TEST(PrefixCacheTest, SharedScopeSaltIsShared) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> system_prompt = Range(1, 8);
  // Two tenants whose requests start with an operator-declared public
  // system prompt use the scope's common salt for it.
  BlockLease a = Admit(*pager, Concat(system_prompt, {90, 91}), "scope:pub");
  absl::StatusOr<BlockLease> b =
      pager->Allocate(Concat(system_prompt, {70}), "scope:pub");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens(), 8);
}

TEST(PrefixCacheTest, OneTokenDifferenceMissesEverythingAfterIt) {
  auto pager = MakePager(32, kB);
  const std::vector<int32_t> prompt = Range(0, 17);  // 4 full blocks + 1
  BlockLease a = Admit(*pager, prompt, "t");
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 16);
  for (int block = 0; block < 4; ++block) {
    for (int offset : {0, kB - 1}) {
      std::vector<int32_t> changed = prompt;
      changed[block * kB + offset] += 1000;
      EXPECT_EQ(pager->CachedPrefixTokens(changed, "t"), block * kB)
          << "changed block " << block << " offset " << offset;
    }
  }
  // A change in the last, partial block changes nothing cached.
  std::vector<int32_t> tail = prompt;
  tail[16] += 1000;
  EXPECT_EQ(pager->CachedPrefixTokens(tail, "t"), 16);
  // A shorter prompt hits its own full blocks only.
  EXPECT_EQ(pager->CachedPrefixTokens(Range(0, 10), "t"), 8);
}

TEST(PrefixCacheTest, TheLastPromptTokenIsAlwaysComputed) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> prompt = Range(0, 12);  // exactly 3 blocks
  BlockLease a = Admit(*pager, prompt, "t");
  EXPECT_EQ(pager->prefix_cache().size(), 3);
  // The whole prompt is cached, yet the last block is recomputed.
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 8);
  EXPECT_EQ(pager->CachedPrefixTokens(Concat(prompt, {5}), "t"), 12);
  EXPECT_EQ(pager->CachedPrefixTokens(Range(0, 1), "t"), 0);

  absl::StatusOr<BlockLease> b = pager->Allocate(prompt, "t");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens(), 8);
  const int32_t a_last = a.block_ids()[2];
  const int32_t b_last = b->block_ids()[2];
  EXPECT_NE(a_last, b_last);
  // b recomputes block 2: a's copy is live, so it keeps the entry and b's
  // duplicate stays unregistered.
  ASSERT_TRUE(pager->MarkComputed(&*b, 12).ok());
  EXPECT_TRUE(pager->pool().registered(a_last));
  EXPECT_FALSE(pager->pool().registered(b_last));
  // Once a is gone its copy is only cached: the next duplicate to be
  // registered takes the entry over and the idle copy is freed.
  a.Reset();
  EXPECT_EQ(pager->pool().state(a_last), BlockState::kCached);
  absl::StatusOr<BlockLease> c = pager->Allocate(prompt, "t");
  ASSERT_TRUE(c.ok());
  const int32_t c_last = c->block_ids()[2];
  const PagerStats before = pager->Stats();
  ASSERT_TRUE(pager->MarkComputed(&*c, 12).ok());
  EXPECT_TRUE(pager->pool().registered(c_last));
  EXPECT_EQ(pager->pool().state(a_last), BlockState::kFree);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(prompt, 2, "t")), c_last);
  EXPECT_EQ(pager->Stats().free_blocks, before.free_blocks + 1);
  EXPECT_EQ(pager->Stats().cached_blocks, before.cached_blocks - 1);
  EXPECT_EQ(pager->Stats().evictions, 0);
  ExpectConsistent(*pager);
}

TEST(PrefixCacheTest, BlocksFilledByGeneratedTokensAreCached) {
  auto pager = MakePager(16, kB);
  absl::StatusOr<BlockLease> a = pager->Allocate({1, 2, 3}, "t");
  ASSERT_TRUE(a.ok());
  std::vector<BlockCopy> copies;
  for (int32_t token : {4, 5, 6, 7, 8, 9}) {
    ASSERT_TRUE(pager->Append(&*a, {token}, &copies).ok());
  }
  EXPECT_TRUE(copies.empty());
  ASSERT_TRUE(pager->MarkComputed(&*a, 8).ok());
  EXPECT_EQ(pager->prefix_cache().size(), 2);
  EXPECT_EQ(pager->CachedPrefixTokens(Range(1, 9), "t"), 8);
}

TEST(PrefixCacheTest, EvictionIsLeastRecentlyUsedAndDropsTheKey) {
  auto pager = MakePager(8, kB);
  const std::vector<int32_t> x = Range(0, 8);
  const std::vector<int32_t> y = Range(100, 8);
  const std::vector<int32_t> z = Range(200, 8);
  BlockLease lx = Admit(*pager, x, "t");
  BlockLease ly = Admit(*pager, y, "t");
  BlockLease lz = Admit(*pager, z, "t");
  const std::vector<int32_t> xb(lx.block_ids().begin(), lx.block_ids().end());
  const std::vector<int32_t> yb(ly.block_ids().begin(), ly.block_ids().end());
  const std::vector<int32_t> zb(lz.block_ids().begin(), lz.block_ids().end());
  // Freed in the order y, x, z; each sequence releases its tail first.
  ly.Reset();
  lx.Reset();
  lz.Reset();
  EXPECT_EQ(pager->pool().CachedInLruOrder(),
            (std::vector<int32_t>{yb[1], yb[0], xb[1], xb[0], zb[1], zb[0]}));

  // A hit on x refreshes it: it becomes the most recently used.
  absl::StatusOr<BlockLease> x2 = pager->Allocate(Concat(x, {9}), "t");
  ASSERT_TRUE(x2.ok());
  EXPECT_EQ(x2->num_cached_tokens(), 8);
  x2->Reset();
  EXPECT_EQ(pager->pool().CachedInLruOrder(),
            (std::vector<int32_t>{yb[1], yb[0], zb[1], zb[0], xb[1], xb[0]}));

  // A 4-block prompt takes the 2 free blocks, then evicts y's two.
  const PagerStats before = pager->Stats();
  EXPECT_EQ(before.free_blocks, 2);
  absl::StatusOr<BlockLease> w = pager->Allocate(Range(300, 16), "t");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(pager->Stats().evictions, 2);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(y, 0, "t")), -1);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(y, 1, "t")), -1);
  EXPECT_EQ(pager->CachedPrefixTokens(Concat(y, {1}), "t"), 0);
  EXPECT_EQ(pager->CachedPrefixTokens(Concat(z, {1}), "t"), 8);
  EXPECT_EQ(pager->CachedPrefixTokens(Concat(x, {1}), "t"), 8);

  // Explicit eviction continues in LRU order: z's tail, then z's head.
  EXPECT_EQ(pager->EvictCached(1), 1);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(z, 1, "t")), -1);
  EXPECT_EQ(pager->prefix_cache().Find(KeyOf(z, 0, "t")), zb[0]);
  EXPECT_EQ(pager->CachedPrefixTokens(Concat(z, {1}), "t"), 4);
  EXPECT_EQ(pager->EvictCached(10), 3);
  EXPECT_EQ(pager->Stats().evictions, 6);
  EXPECT_EQ(pager->Stats().cached_blocks, 0);
  EXPECT_EQ(pager->prefix_cache().size(), 0);
  ExpectConsistent(*pager);
}

// Keys that ignore the tokens and the salt: every chain of the same length
// collides.
BlockKey TokenBlindHash(const BlockKey& parent, const BlockKey& salt,
                        absl::Span<const int32_t> tokens) {
  (void)salt;
  return BlockKey{parent.lo * 31 + 1, tokens.empty() ? 0u : 1u};
}

TEST(PrefixCacheTest, CollidingKeysNeverAlias) {
  absl::StatusOr<std::unique_ptr<KvPager>> made =
      KvPager::Create(16, kB, &TokenBlindHash);
  ASSERT_TRUE(made.ok());
  KvPager& pager = **made;
  const std::vector<int32_t> x = Range(0, 8);
  BlockLease lx = Admit(pager, x, "t");
  // Same keys, different tokens: no hit.
  EXPECT_EQ(pager.CachedPrefixTokens(Range(50, 9), "t"), 0);
  // Same first block, different second: only the first is shared.
  const std::vector<int32_t> y = Concat(Range(0, 4), Range(60, 4));
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(y, {1}), "t"), 4);
  absl::StatusOr<BlockLease> ly = pager.Allocate(Concat(y, {1}), "t");
  ASSERT_TRUE(ly.ok());
  EXPECT_EQ(ly->num_cached_tokens(), 4);
  // Registering y's second block meets x's under the same key; the tokens
  // differ, so x's entry is dropped (x keeps its block) and y's is taken.
  ASSERT_TRUE(pager.MarkComputed(&*ly, 9).ok());
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(x, {1}), "t"), 4);
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(y, {1}), "t"), 8);
  EXPECT_EQ(
      pager.prefix_cache().Find(TokenBlindHash(
          TokenBlindHash(kRootBlockKey, HashSalt("t"), x), HashSalt("t"), x)),
      ly->block_ids()[1]);
  EXPECT_FALSE(pager.pool().registered(lx.block_ids()[1]));
  // Another salt has the same keys and tokens, yet never shares.
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(y, {1}), "u"), 0);
  absl::StatusOr<BlockLease> lu = pager.Allocate(Concat(y, {1}), "u");
  ASSERT_TRUE(lu.ok());
  EXPECT_EQ(lu->num_cached_tokens(), 0);
  ExpectConsistent(pager);
}

TEST(PrefixCacheTest, AHitNeedsItsOwnParent) {
  // With keys blind to tokens, [c][b] has the keys of [a][b]. Once [c]
  // replaces [a] under their common key, [a][b]'s second block is still
  // cached with tokens b, but it was computed after a, not c: no hit.
  absl::StatusOr<std::unique_ptr<KvPager>> made =
      KvPager::Create(16, kB, &TokenBlindHash);
  ASSERT_TRUE(made.ok());
  KvPager& pager = **made;
  const std::vector<int32_t> a = Range(0, 4);
  const std::vector<int32_t> b = Range(10, 4);
  const std::vector<int32_t> c = Range(20, 4);
  BlockLease lab = Admit(pager, Concat(Concat(a, b), {1}), "t");
  BlockLease lc = Admit(pager, Concat(c, {1}), "t");
  EXPECT_FALSE(pager.pool().registered(lab.block_ids()[0]));
  EXPECT_TRUE(pager.pool().registered(lab.block_ids()[1]));
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(Concat(c, b), {1}), "t"), 4);
  EXPECT_EQ(pager.CachedPrefixTokens(Concat(Concat(a, b), {1}), "t"), 0);
  ExpectConsistent(pager);
}

TEST(PrefixCacheTest, ResetDropsEveryEntry) {
  auto pager = MakePager(16, kB);
  const std::vector<int32_t> prompt = Range(0, 9);
  BlockLease a = Admit(*pager, prompt, "t");
  BlockLease b = Admit(*pager, Range(50, 9), "t");
  b.Reset();
  EXPECT_EQ(pager->Stats().cached_blocks, 2);
  pager->ResetPrefixCache();
  EXPECT_EQ(pager->prefix_cache().size(), 0);
  EXPECT_EQ(pager->Stats().cached_blocks, 0);
  EXPECT_EQ(pager->Stats().free_blocks, 13);
  EXPECT_EQ(pager->Stats().evictions, 0);
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 0);
  // The live lease keeps working; its chain is gone, so it registers
  // nothing more.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&a, {1, 2, 3}, &copies).ok());
  ASSERT_TRUE(pager->MarkComputed(&a, 12).ok());
  EXPECT_EQ(pager->prefix_cache().size(), 0);
  a.Reset();
  EXPECT_EQ(pager->Stats().free_blocks, 16);
  ExpectConsistent(*pager);
}

}  // namespace
}  // namespace paceline::kvpager
