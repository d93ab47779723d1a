#ifndef PACELINE_KVPAGER_BLOCK_HASH_H_
#define PACELINE_KVPAGER_BLOCK_HASH_H_

// The prefix-cache key of a full KV block (DESIGN.md §4):
//
//   key(block i) = H(key(block i - 1), salt key, token ids of block i)
//
// with key(block -1) = kRootBlockKey, so a key names the whole token prefix
// up to the end of its block, under one salt. H is a 128-bit multiply-fold
// hash written for this module (two 64-bit lanes, 64x64->128 multiplies,
// splitmix64-style finalizers). It is fast (~25 ns per 16-token block on this
// project's VM) but NOT cryptographic: a determined client could build two
// prefixes with the same key. That is why the prefix cache never trusts a key
// alone: a hit is taken only after comparing the block's stored token ids, its
// salt, and the identity of its parent entry (prefix_cache.h). A collision can
// cost a cache miss, never alias two different prefixes.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paceline::kvpager {

struct BlockKey {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const BlockKey&, const BlockKey&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& key) {
    return H::combine(std::move(h), key.lo, key.hi);
  }
};

// The parent key of a sequence's first block.
inline constexpr BlockKey kRootBlockKey{};

// The key of a block holding `tokens` (any length, usually block_size),
// whose prefix has key `parent`, under salt key `salt`.
BlockKey HashBlock(const BlockKey& parent, const BlockKey& salt,
                   absl::Span<const int32_t> tokens);

// The signature of HashBlock. The pager takes another function only in
// tests, which pass a deliberately weak one to force key collisions.
using BlockHashFn = BlockKey (*)(const BlockKey& parent, const BlockKey& salt,
                                 absl::Span<const int32_t> tokens);

// The salt key of a salt string (a tenant name, or a shared scope's name).
BlockKey HashSalt(absl::string_view salt);

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_BLOCK_HASH_H_
