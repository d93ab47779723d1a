// KvPagerPropertyTest: long random sequences of pager operations (allocate,
// append, mark computed, fork, free, lookup, evict, reset) on a pool of 100
// blocks under several salts, checked against a model of the live leases
// after every step:
//   - free + used + cached = total;
//   - each block's refcount = the number of live tables that reference it,
//     used iff referenced, never free and referenced;
//   - each table covers its sequence, its blocks hold exactly the
//     sequence's tokens, and each block was computed under exactly the
//     sequence's prefix up to it (a strong fingerprint of the whole prefix
//     is recorded when a block is written, so no hit or fork ever aliased
//     another prefix, even under the run that forces key collisions);
//   - the hash map points only at blocks whose key is the key of their
//     content (the pager's own check, plus keys recomputed from the
//     sequences that hold the blocks);
//   - check/act agreement, all-or-nothing failures, exact copy-on-write
//     pairs, exact eviction counts in LRU order;
// and at the end, with every lease freed, nothing used and nothing leaked.
// Seeded; every failure names the seed and step (PACELINE_PROPERTY_SEED
// replays one seed).

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kvpager/block_hash.h"
#include "kvpager/kv_pager.h"

namespace paceline::kvpager {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr int32_t kNumBlocks = 100;
constexpr int kMaxLeases = 24;
constexpr int kMaxTokens = 48;
const char* const kSalts[] = {"tenant-a", "tenant-b", "shared:system"};

struct Sequence {
  BlockLease lease;
  std::vector<int32_t> tokens;
  std::string salt;
};

struct Snapshot {
  PagerStats stats;
  std::vector<BlockState> states;
  std::vector<int32_t> refs;
  std::vector<int32_t> lru;

  bool operator==(const Snapshot& o) const {
    const PagerStats& a = stats;
    const PagerStats& b = o.stats;
    return a.free_blocks == b.free_blocks && a.used_blocks == b.used_blocks &&
           a.cached_blocks == b.cached_blocks &&
           a.prefix_queries == b.prefix_queries && a.evictions == b.evictions &&
           a.cow_copies == b.cow_copies && states == o.states &&
           refs == o.refs && lru == o.lru;
  }
};

class Runner {
 public:
  Runner(uint64_t seed, int32_t block_size, BlockHashFn hash)
      : rng_(seed),
        bs_(block_size),
        hash_(hash),
        pager_(std::move(*KvPager::Create(kNumBlocks, block_size, hash))),
        expected_key_(kNumBlocks),
        context_(kNumBlocks) {
    // Per salt, a few base sequences that prompts start with, over a small
    // vocabulary so that prefixes repeat and differ in single tokens.
    for (size_t s = 0; s < std::size(kSalts); ++s) {
      for (int b = 0; b < 3; ++b) bases_.push_back(RandomTokens(28));
    }
  }

  ~Runner() { seqs_.clear(); }  // leases go before the pager

  // One random operation; `*op` names it.
  AssertionResult Step(std::string* op) {
    const int dice = Uniform(0, 999);
    if (dice < 250 || seqs_.empty()) {
      *op = "allocate";
      return Allocate(RandomPrompt());
    }
    const int i = Uniform(0, static_cast<int>(seqs_.size()) - 1);
    if (dice < 520) {
      *op = "append";
      return Append(i);
    }
    if (dice < 700) {
      *op = "mark computed";
      return Mark(i);
    }
    if (dice < 780) {
      *op = "fork";
      return Fork(i);
    }
    if (dice < 930) {
      *op = "free";
      seqs_.erase(seqs_.begin() + i);
      return AssertionSuccess();
    }
    if (dice < 980) {
      *op = "lookup";
      return Lookup(RandomPrompt());
    }
    if (dice < 998) {
      *op = "evict";
      return Evict(Uniform(1, 6));
    }
    *op = "reset";
    pager_->ResetPrefixCache();
    return AssertionSuccess();
  }

  // The invariants of the file comment.
  AssertionResult Check() {
    const PagerStats s = pager_->Stats();
    if (s.free_blocks + s.used_blocks + s.cached_blocks != s.total_blocks) {
      return AssertionFailure() << "free + used + cached != total";
    }
    if (absl::Status st = pager_->CheckConsistency(); !st.ok()) {
      return AssertionFailure() << st;
    }
    const BlockPool& pool = pager_->pool();
    std::vector<int32_t> refs(kNumBlocks, 0);
    for (const Sequence& seq : seqs_) {
      const BlockLease& lease = seq.lease;
      const int32_t n = static_cast<int32_t>(seq.tokens.size());
      if (lease.num_tokens() != n ||
          lease.num_blocks() != (n + bs_ - 1) / bs_) {
        return AssertionFailure() << "table does not cover the sequence";
      }
      for (int32_t b : lease.block_ids()) ++refs[b];
      for (int32_t p = 0; p < n; ++p) {
        if (pool.tokens(lease.block_ids()[p / bs_])[p % bs_] != seq.tokens[p]) {
          return AssertionFailure() << "block content differs at " << p;
        }
      }
      const std::vector<BlockKey> contexts = Contexts(seq.tokens);
      for (int32_t i = 0; i < lease.num_blocks(); ++i) {
        if (!(context_[lease.block_ids()[i]] == contexts[i])) {
          return AssertionFailure() << "block " << lease.block_ids()[i]
                                    << " was computed under another prefix";
        }
      }
      // Registered blocks: key = the key of the sequence's own prefix, salt
      // = the sequence's salt (tenants never share).
      BlockKey key = kRootBlockKey;
      const BlockKey salt = HashSalt(seq.salt);
      const uint32_t salt_id =
          pager_->prefix_cache().FindSalt(seq.salt).value().id;
      for (int32_t i = 0; i < n / bs_; ++i) {
        key = hash_(key, salt,
                    absl::MakeConstSpan(seq.tokens).subspan(i * bs_, bs_));
        const int32_t b = lease.block_ids()[i];
        if (!pool.registered(b)) continue;
        if (!(pager_->prefix_cache().entry(b).key == key)) {
          return AssertionFailure() << "block " << b << " key != content key";
        }
        if (pager_->prefix_cache().entry(b).salt_id != salt_id) {
          return AssertionFailure() << "block " << b << " shared across salts";
        }
        expected_key_[b] = key;
      }
    }
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      const BlockState state = pool.state(b);
      if (pool.ref_count(b) != refs[b]) {
        return AssertionFailure()
               << "block " << b << " ref " << pool.ref_count(b) << ", "
               << refs[b] << " tables";
      }
      if ((state == BlockState::kUsed) != (refs[b] > 0)) {
        return AssertionFailure() << "block " << b << " used != referenced";
      }
      if (state == BlockState::kCached &&
          !(expected_key_[b].has_value() &&
            *expected_key_[b] == pager_->prefix_cache().entry(b).key)) {
        return AssertionFailure() << "cached block " << b << " changed key";
      }
      if (state == BlockState::kFree) expected_key_[b].reset();
    }
    return AssertionSuccess();
  }

  // Frees everything; nothing may stay used or leak.
  AssertionResult Drain() {
    seqs_.clear();
    const PagerStats s = pager_->Stats();
    if (s.used_blocks != 0 || s.free_blocks + s.cached_blocks != kNumBlocks) {
      return AssertionFailure() << "blocks leaked after freeing everything";
    }
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      if (pager_->pool().ref_count(b) != 0) {
        return AssertionFailure() << "block " << b << " still referenced";
      }
    }
    if (AssertionResult r = Check(); !r) return r;
    pager_->EvictCached(kNumBlocks);
    if (pager_->Stats().free_blocks != kNumBlocks ||
        pager_->prefix_cache().size() != 0) {
      return AssertionFailure() << "cache not empty after evicting all";
    }
    return Check();
  }

  const PagerStats stats() const { return pager_->Stats(); }
  int64_t failed_acts() const { return failed_acts_; }

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  std::vector<int32_t> RandomTokens(int n) {
    std::vector<int32_t> tokens(n);
    for (int32_t& t : tokens) t = Uniform(0, 7);
    return tokens;
  }
  const std::string& RandomSalt() {
    salt_ = kSalts[Uniform(0, std::size(kSalts) - 1)];
    return salt_;
  }
  std::vector<int32_t> RandomPrompt() {
    const std::vector<int32_t>& base =
        bases_[Uniform(0, static_cast<int>(bases_.size()) - 1)];
    std::vector<int32_t> prompt(base.begin(),
                                base.begin() + Uniform(0, base.size()));
    const std::vector<int32_t> tail = RandomTokens(Uniform(0, 5));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    if (prompt.empty()) prompt.push_back(Uniform(0, 7));
    if (Uniform(0, 9) == 0 && prompt.size() > 1) {
      prompt[Uniform(0, prompt.size() - 1)] ^= 1;  // a one-token change
    }
    return prompt;
  }

  // Fingerprints of `tokens`' prefixes through the end of each block (the
  // last one possibly partial), with the real hash whatever the pager uses.
  std::vector<BlockKey> Contexts(const std::vector<int32_t>& tokens) const {
    std::vector<BlockKey> out;
    BlockKey key = kRootBlockKey;
    for (size_t begin = 0; begin < tokens.size(); begin += bs_) {
      const size_t n = std::min<size_t>(bs_, tokens.size() - begin);
      key = HashBlock(key, kRootBlockKey,
                      absl::MakeConstSpan(tokens).subspan(begin, n));
      out.push_back(key);
    }
    return out;
  }

  // Records the contexts of blocks [first, end) of `lease` as written.
  void Written(const BlockLease& lease, const std::vector<int32_t>& tokens,
               int32_t first) {
    const std::vector<BlockKey> contexts = Contexts(tokens);
    for (int32_t i = first; i < lease.num_blocks(); ++i) {
      context_[lease.block_ids()[i]] = contexts[i];
    }
  }

  Snapshot Snap() const {
    Snapshot s{pager_->Stats(), {}, {}, pager_->pool().CachedInLruOrder()};
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      s.states.push_back(pager_->pool().state(b));
      s.refs.push_back(pager_->pool().ref_count(b));
    }
    return s;
  }

  // The cache hits for `prompt`, found the way Allocate finds them.
  std::vector<int32_t> Hits(const std::vector<int32_t>& prompt,
                            const std::string& salt) const {
    std::vector<int32_t> hits;
    if (std::optional<Salt> s = pager_->prefix_cache().FindSalt(salt)) {
      pager_->prefix_cache().Match(
          prompt, static_cast<int32_t>((prompt.size() - 1) / bs_), *s, &hits);
    }
    return hits;
  }

  // Evictions must take the least recently used cached blocks that are not
  // hits: the first `n` of `lru` without `hits` must be exactly `taken`.
  static AssertionResult EvictedInLruOrder(std::vector<int32_t> lru,
                                           const std::vector<int32_t>& hits,
                                           std::vector<int32_t> taken) {
    std::erase_if(lru, [&](int32_t b) {
      return std::find(hits.begin(), hits.end(), b) != hits.end();
    });
    if (taken.size() > lru.size()) return AssertionFailure() << "overdraw";
    std::vector<int32_t> first(lru.begin(), lru.begin() + taken.size());
    std::sort(first.begin(), first.end());
    std::sort(taken.begin(), taken.end());
    if (first != taken) return AssertionFailure() << "eviction not LRU";
    return AssertionSuccess();
  }

  AssertionResult Allocate(const std::vector<int32_t>& prompt) {
    if (static_cast<int>(seqs_.size()) >= kMaxLeases) return Lookup(prompt);
    const std::string salt = RandomSalt();
    const Snapshot before = Snap();
    const std::vector<int32_t> hits = Hits(prompt, salt);
    const int32_t lookup = pager_->CachedPrefixTokens(prompt, salt);
    if (lookup != static_cast<int32_t>(hits.size()) * bs_) {
      return AssertionFailure() << "lookup disagrees with the chain walk";
    }
    int32_t hits_cached = 0;
    for (int32_t b : hits) {
      hits_cached += before.states[b] == BlockState::kCached;
    }
    const int32_t need =
        (static_cast<int32_t>(prompt.size()) + bs_ - 1) / bs_ - lookup / bs_;
    const bool fits = need <= before.stats.free_blocks +
                                  before.stats.cached_blocks - hits_cached;
    if (pager_->CanAllocate(prompt, salt) != fits) {
      return AssertionFailure() << "CanAllocate != " << fits;
    }
    absl::StatusOr<BlockLease> lease = pager_->Allocate(prompt, salt);
    if (!fits) {
      ++failed_acts_;
      if (lease.status().code() != absl::StatusCode::kResourceExhausted) {
        return AssertionFailure() << "expected ResourceExhausted";
      }
      if (!(Snap() == before)) return AssertionFailure() << "half-allocated";
      return AssertionSuccess();
    }
    if (!lease.ok()) return AssertionFailure() << lease.status();
    if (lease->num_cached_tokens() != lookup) {
      return AssertionFailure() << "cached tokens differ from the lookup";
    }
    const PagerStats after = pager_->Stats();
    const int64_t evicted =
        std::max<int64_t>(0, need - before.stats.free_blocks);
    std::vector<int32_t> taken;
    for (int32_t i = lookup / bs_; i < lease->num_blocks(); ++i) {
      if (before.states[lease->block_ids()[i]] == BlockState::kCached) {
        taken.push_back(lease->block_ids()[i]);
      }
    }
    if (after.evictions - before.stats.evictions != evicted ||
        static_cast<int64_t>(taken.size()) != evicted ||
        after.prefix_queries != before.stats.prefix_queries + 1 ||
        after.prefix_hit_tokens != before.stats.prefix_hit_tokens + lookup) {
      return AssertionFailure() << "allocation counters";
    }
    if (AssertionResult r = EvictedInLruOrder(before.lru, hits, taken); !r) {
      return r;
    }
    Written(*lease, prompt, lookup / bs_);
    seqs_.push_back(Sequence{std::move(*lease), prompt, salt});
    return AssertionSuccess();
  }

  AssertionResult Append(int i) {
    Sequence& seq = seqs_[i];
    const int32_t n = Uniform(0, 3) == 0 ? Uniform(2, 6) : 1;
    if (static_cast<int>(seq.tokens.size()) + n > kMaxTokens) {
      seqs_.erase(seqs_.begin() + i);  // finished
      return AssertionSuccess();
    }
    const Snapshot before = Snap();
    const int32_t len = seq.lease.num_tokens();
    const int32_t last = seq.lease.num_blocks() - 1;
    const bool cow =
        len % bs_ != 0 && before.refs[seq.lease.block_ids()[last]] > 1;
    const int32_t need =
        (len + n + bs_ - 1) / bs_ - seq.lease.num_blocks() + (cow ? 1 : 0);
    const bool fits =
        need <= before.stats.free_blocks + before.stats.cached_blocks;
    if (pager_->CanAppend(seq.lease, n) != fits) {
      return AssertionFailure() << "CanAppend != " << fits;
    }
    const std::vector<int32_t> old_ids(seq.lease.block_ids().begin(),
                                       seq.lease.block_ids().end());
    const std::vector<int32_t> tokens = RandomTokens(n);
    std::vector<BlockCopy> copies;
    const absl::Status status = pager_->Append(&seq.lease, tokens, &copies);
    if (!fits) {
      ++failed_acts_;
      if (status.code() != absl::StatusCode::kResourceExhausted ||
          !copies.empty() || !(Snap() == before) ||
          seq.lease.num_tokens() != len) {
        return AssertionFailure() << "append half-succeeded: " << status;
      }
      return AssertionSuccess();
    }
    if (!status.ok()) return AssertionFailure() << status;
    if (copies.size() != (cow ? 1u : 0u)) {
      return AssertionFailure() << "expected " << cow << " copies";
    }
    if (cow &&
        !(copies[0] == BlockCopy{old_ids[last], seq.lease.block_ids()[last]})) {
      return AssertionFailure() << "wrong copy pair";
    }
    std::vector<int32_t> taken;
    for (int32_t b = cow ? last : last + 1; b < seq.lease.num_blocks(); ++b) {
      if (before.states[seq.lease.block_ids()[b]] == BlockState::kCached) {
        taken.push_back(seq.lease.block_ids()[b]);
      }
    }
    const PagerStats after = pager_->Stats();
    const int64_t evicted =
        std::max<int64_t>(0, need - before.stats.free_blocks);
    if (after.cow_copies - before.stats.cow_copies != (cow ? 1 : 0) ||
        after.evictions - before.stats.evictions != evicted ||
        static_cast<int64_t>(taken.size()) != evicted) {
      return AssertionFailure() << "append counters";
    }
    if (AssertionResult r = EvictedInLruOrder(before.lru, {}, taken); !r) {
      return r;
    }
    seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
    Written(seq.lease, seq.tokens, len % bs_ != 0 ? last : last + 1);
    return AssertionSuccess();
  }

  AssertionResult Mark(int i) {
    Sequence& seq = seqs_[i];
    const int32_t len = seq.lease.num_tokens();
    const int32_t n = Uniform(0, 3) == 0 ? Uniform(0, len) : len;
    const absl::Status status = pager_->MarkComputed(&seq.lease, n);
    if (!status.ok()) return AssertionFailure() << status;
    return AssertionSuccess();
  }

  AssertionResult Fork(int i) {
    if (static_cast<int>(seqs_.size()) >= kMaxLeases) return Mark(i);
    const PagerStats before = pager_->Stats();
    absl::StatusOr<BlockLease> fork = pager_->Fork(seqs_[i].lease);
    if (!fork.ok()) return AssertionFailure() << fork.status();
    if (pager_->Stats().free_blocks != before.free_blocks) {
      return AssertionFailure() << "fork took blocks";
    }
    Sequence copy{std::move(*fork), seqs_[i].tokens, seqs_[i].salt};
    seqs_.push_back(std::move(copy));
    return AssertionSuccess();
  }

  AssertionResult Lookup(const std::vector<int32_t>& prompt) {
    const std::string salt = RandomSalt();
    const PagerStats before = pager_->Stats();
    const std::vector<int32_t> hits = Hits(prompt, salt);
    if (pager_->CachedPrefixTokens(prompt, salt) !=
        static_cast<int32_t>(hits.size()) * bs_) {
      return AssertionFailure() << "lookup disagrees with the chain walk";
    }
    for (size_t i = 0; i < hits.size(); ++i) {
      if (!pager_->pool().registered(hits[i])) {
        return AssertionFailure() << "hit on an unregistered block";
      }
      for (int32_t j = 0; j < bs_; ++j) {
        if (pager_->pool().tokens(hits[i])[j] != prompt[i * bs_ + j]) {
          return AssertionFailure() << "hit on different tokens";
        }
      }
    }
    if (pager_->Stats().prefix_queries != before.prefix_queries) {
      return AssertionFailure() << "a lookup counted as a query";
    }
    return AssertionSuccess();
  }

  AssertionResult Evict(int32_t n) {
    const std::vector<int32_t> lru = pager_->pool().CachedInLruOrder();
    const int32_t expected = std::min<int32_t>(n, lru.size());
    if (pager_->EvictCached(n) != expected) {
      return AssertionFailure() << "EvictCached count";
    }
    for (int32_t k = 0; k < expected; ++k) {
      if (pager_->pool().state(lru[k]) != BlockState::kFree) {
        return AssertionFailure() << "evicted out of LRU order";
      }
    }
    const std::vector<int32_t> rest(lru.begin() + expected, lru.end());
    if (pager_->pool().CachedInLruOrder() != rest) {
      return AssertionFailure() << "LRU order changed";
    }
    return AssertionSuccess();
  }

  std::mt19937_64 rng_;
  const int32_t bs_;
  const BlockHashFn hash_;
  std::unique_ptr<KvPager> pager_;
  std::vector<Sequence> seqs_;
  std::vector<std::vector<int32_t>> bases_;
  std::vector<std::optional<BlockKey>> expected_key_;
  // Per block: the fingerprint of the sequence prefix it was written under
  // (through its last written slot).
  std::vector<BlockKey> context_;
  std::string salt_;
  int64_t failed_acts_ = 0;
};

// A deliberately weak hash: 8 distinct keys in all, whatever the tokens
// beyond the first one's low bit. Every lookup and registration collides.
BlockKey CollidingHash(const BlockKey& parent, const BlockKey& salt,
                       absl::Span<const int32_t> tokens) {
  const uint64_t bit = tokens.empty() ? 0 : (tokens[0] & 1);
  return BlockKey{(parent.lo * 3 + (salt.lo & 1) + bit) % 8, 0};
}

uint64_t BaseSeed() {
  const char* env = std::getenv("PACELINE_PROPERTY_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261130;
}

// A seed of its own for each run of the test binary (printed, so a
// failure can be replayed with PACELINE_PROPERTY_SEED).
uint64_t FreshSeed() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

TEST(KvPagerPropertyTest, RandomOperationsKeepEveryInvariant) {
  // Run 4 forces key collisions: the cache must stay exact. The last run
  // takes a fresh seed each time the test runs (unless
  // PACELINE_PROPERTY_SEED is set), so CI keeps exploring new sequences.
  constexpr int kRuns = 6;
  constexpr int kStepsPerRun = 30000;  // 180,000 operations in all
  const int32_t block_sizes[kRuns] = {4, 4, 3, 2, 4, 4};
  const BlockHashFn hashes[kRuns] = {&HashBlock, &HashBlock,     &HashBlock,
                                     &HashBlock, &CollidingHash, &HashBlock};
  const uint64_t base = BaseSeed();
  const bool replaying = std::getenv("PACELINE_PROPERTY_SEED") != nullptr;
  for (int run = 0; run < kRuns; ++run) {
    const bool fresh = run == kRuns - 1 && !replaying;
    const uint64_t seed = fresh ? FreshSeed() : base + run;
    if (fresh) std::cout << "fresh seed " << seed << "\n";
    Runner runner(seed, block_sizes[run], hashes[run]);
    std::string op;
    for (int step = 0; step < kStepsPerRun; ++step) {
      const AssertionResult r = runner.Step(&op);
      ASSERT_TRUE(r) << "seed " << seed << " step " << step << " (" << op
                     << ")";
      ASSERT_TRUE(runner.Check())
          << "seed " << seed << " step " << step << " after " << op;
    }
    const PagerStats s = runner.stats();
    ASSERT_TRUE(runner.Drain()) << "seed " << seed << " at the end";
    std::cout << "seed " << seed << " block size " << block_sizes[run]
              << (hashes[run] == &HashBlock ? "" : " colliding hash")
              << ": queries " << s.prefix_queries << ", query tokens "
              << s.prefix_query_tokens << ", hit tokens " << s.prefix_hit_tokens
              << ", evictions " << s.evictions << ", copies " << s.cow_copies
              << ", refused acts " << runner.failed_acts() << "\n";
    // The mix reaches every path: hits, evictions, copies, refusals (the
    // fixed seeds are known to; a fresh one is held to the invariants).
    if (fresh) continue;
    EXPECT_GT(s.prefix_hit_tokens, 0) << "seed " << seed;
    EXPECT_GT(s.evictions, 0) << "seed " << seed;
    EXPECT_GT(s.cow_copies, 0) << "seed " << seed;
    EXPECT_GT(runner.failed_acts(), 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace paceline::kvpager
