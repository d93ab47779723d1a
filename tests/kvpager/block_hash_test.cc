// The block key hash: deterministic, sensitive to every input, and free of
// collisions and bias on a large random sample.

#include "kvpager/block_hash.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace paceline::kvpager {
namespace {

std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int n) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 32000);
  return tokens;
}

int BitsDiffer(const BlockKey& a, const BlockKey& b) {
  return std::popcount(a.lo ^ b.lo) + std::popcount(a.hi ^ b.hi);
}

TEST(BlockHashTest, Deterministic) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  const BlockKey salt = HashSalt("tenant-a");
  EXPECT_EQ(HashSalt("tenant-a"), salt);
  EXPECT_EQ(HashBlock(kRootBlockKey, salt, tokens),
            HashBlock(kRootBlockKey, salt, tokens));
}

TEST(BlockHashTest, EveryInputMatters) {
  std::mt19937_64 rng(7);
  const std::vector<int32_t> tokens = RandomTokens(rng, 16);
  const BlockKey salt = HashSalt("tenant-a");
  const BlockKey parent = HashBlock(kRootBlockKey, salt, tokens);
  const BlockKey key = HashBlock(parent, salt, tokens);

  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int32_t> changed = tokens;
    changed[i] ^= 1;
    EXPECT_NE(HashBlock(parent, salt, changed), key) << "token " << i;
  }
  EXPECT_NE(HashBlock(kRootBlockKey, salt, tokens), key);
  EXPECT_NE(HashBlock(parent, HashSalt("tenant-b"), tokens), key);
  EXPECT_NE(HashSalt("tenant-a"), HashSalt("tenant-b"));
  EXPECT_NE(HashSalt(""), HashSalt(std::string(1, '\0')));
  // Length is hashed: a trailing token equal to the odd-length padding, and
  // a shorter block, both differ.
  std::vector<int32_t> odd(tokens.begin(), tokens.begin() + 15);
  std::vector<int32_t> padded = odd;
  padded.push_back(-1);
  EXPECT_NE(HashBlock(parent, salt, odd), HashBlock(parent, salt, padded));
  // Swapping two different tokens changes the key (order matters).
  std::vector<int32_t> swapped = tokens;
  swapped[0] = 1;
  swapped[1] = 2;
  std::vector<int32_t> reordered = swapped;
  std::swap(reordered[0], reordered[1]);
  EXPECT_NE(HashBlock(parent, salt, swapped),
            HashBlock(parent, salt, reordered));
}

TEST(BlockHashTest, LongInputsChainChunks) {
  std::mt19937_64 rng(11);
  std::vector<int32_t> tokens = RandomTokens(rng, 200);
  const BlockKey key = HashBlock(kRootBlockKey, kRootBlockKey, tokens);
  tokens[150] ^= 1;
  EXPECT_NE(HashBlock(kRootBlockKey, kRootBlockKey, tokens), key);
  const std::string long_salt(300, 'x');
  std::string other = long_salt;
  other[299] = 'y';
  EXPECT_NE(HashSalt(long_salt), HashSalt(other));
}

TEST(BlockHashTest, NoCollisionsOnRandomChains) {
  // 200,000 blocks in chains of 8 under 4 salts, with small vocabularies so
  // that many blocks share tokens: every key, and each 64-bit half, is
  // distinct.
  std::mt19937_64 rng(3);
  absl::flat_hash_set<BlockKey> keys;
  absl::flat_hash_set<uint64_t> los;
  absl::flat_hash_set<uint64_t> his;
  const BlockKey salts[] = {HashSalt("a"), HashSalt("b"), HashSalt("c"),
                            HashSalt("d")};
  int blocks = 0;
  for (int chain = 0; chain < 25000; ++chain) {
    BlockKey parent = kRootBlockKey;
    const BlockKey& salt = salts[chain % 4];
    for (int i = 0; i < 8; ++i) {
      std::vector<int32_t> tokens(16);
      for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 4);
      parent = HashBlock(parent, salt, tokens);
      keys.insert(parent);
      los.insert(parent.lo);
      his.insert(parent.hi);
      ++blocks;
    }
  }
  // Identical (parent, salt, tokens) triples would collide legitimately;
  // with 4^16 token patterns per block that has probability ~1e-5.
  EXPECT_EQ(keys.size(), static_cast<size_t>(blocks));
  EXPECT_EQ(los.size(), static_cast<size_t>(blocks));
  EXPECT_EQ(his.size(), static_cast<size_t>(blocks));
}

TEST(BlockHashTest, OneBitFlipsAboutHalfTheOutput) {
  std::mt19937_64 rng(5);
  const BlockKey salt = HashSalt("tenant");
  int64_t total = 0;
  int min_bits = 128;
  int max_bits = 0;
  constexpr int kTrials = 4000;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<int32_t> tokens = RandomTokens(rng, 16);
    const BlockKey parent{rng(), rng()};
    const BlockKey key = HashBlock(parent, salt, tokens);
    std::vector<int32_t> flipped = tokens;
    flipped[rng() % 16] ^= int32_t{1} << (rng() % 31);
    const int bits = BitsDiffer(key, HashBlock(parent, salt, flipped));
    BlockKey parent2 = parent;
    parent2.hi ^= uint64_t{1} << (rng() % 64);
    const int bits2 = BitsDiffer(key, HashBlock(parent2, salt, tokens));
    total += bits + bits2;
    min_bits = std::min({min_bits, bits, bits2});
    max_bits = std::max({max_bits, bits, bits2});
  }
  const double mean = static_cast<double>(total) / (2 * kTrials);
  EXPECT_NEAR(mean, 64.0, 1.0);
  EXPECT_GT(min_bits, 30);
  EXPECT_LT(max_bits, 98);
}

}  // namespace
}  // namespace paceline::kvpager
