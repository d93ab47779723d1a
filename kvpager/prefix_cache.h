#ifndef PACELINE_KVPAGER_PREFIX_CACHE_H_
#define PACELINE_KVPAGER_PREFIX_CACHE_H_

// The prefix cache: full blocks indexed by the key of the token prefix they
// end (block_hash.h), so a new prompt can reuse the K/V of every leading
// block some earlier sequence computed under the same salt.
//
// Exactness. A key is a 128-bit non-cryptographic hash, so the cache never
// trusts it alone. Each registration gets a node id, unique for the pager's
// lifetime, and records its parent's node id; a lookup takes block i only
// if its salt id, its parent node (the node of the block matched at i - 1,
// or kRootNode) and its stored token ids all equal the query's. By
// induction a matched chain holds exactly the query's tokens; a key
// collision can only turn into a miss (or the replacement of the colliding
// entry), never an alias.
//
// Lifetime of an entry: registered when a sequence's full block is marked
// computed; survives its sequences as a cached (ref 0) block on the pool's
// LRU list; dropped when the pool reclaims the block (eviction), when a
// registration finds it stale, or by Clear. Blocks whose parent entry is
// gone stay in the map but are unreachable; they age out through the LRU.
//
// Salts are interned: each distinct salt string gets a small id and a salt
// key, kept for the cache's lifetime, so use a bounded set of salts (tenant
// names, operator-declared shared scopes), not per-request strings.
//
// Thread-safety: none; owned by a KvPager, used from its thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kvpager/block_hash.h"
#include "kvpager/block_pool.h"

namespace paceline::kvpager {

// Parent node of a sequence's first block.
inline constexpr uint64_t kRootNode = 0;
// A chain whose parent entry was dropped: nothing after it can be registered
// (no lookup could reach it).
inline constexpr uint64_t kBrokenNode = ~uint64_t{0};

struct Salt {
  uint32_t id = 0;
  BlockKey key;
};

// How far a sequence's prefix has been keyed: its first `num_blocks` full
// blocks, the last of which has key `key` and cache node `node`.
struct ChainCursor {
  int32_t num_blocks = 0;
  BlockKey key = kRootBlockKey;
  uint64_t node = kRootNode;
};

class PrefixCache {
 public:
  struct Entry {
    BlockKey key;
    BlockKey parent_key;
    uint64_t node = 0;
    uint64_t parent_node = 0;
    uint32_t salt_id = 0;
  };

  // `pool` must outlive the cache; the cache flips its registered bits.
  // `hash` computes block keys (block_hash.h).
  explicit PrefixCache(BlockPool* pool, BlockHashFn hash = &HashBlock);

  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The salt for `salt`, interning it on first use.
  Salt InternSalt(absl::string_view salt);
  // The salt if interned already.
  std::optional<Salt> FindSalt(absl::string_view salt) const;

  // Walks the first `max_blocks` full blocks of `tokens` from the root and
  // returns the cursor after the longest verified chain of cached blocks;
  // appends the matched block ids to `*blocks` when non-null. Changes
  // nothing (the caller takes references).
  ChainCursor Match(absl::Span<const int32_t> tokens, int32_t max_blocks,
                    const Salt& salt, std::vector<int32_t>* blocks) const;

  // Registers the full, used block `block`, which holds the sequence's block
  // number parent.num_blocks, and returns the cursor after it. If a
  // verified equal entry exists, that entry stands and its node is returned;
  // when that entry's block is cached (ref 0), `block` takes the entry over
  // and the duplicate is freed. A stale or colliding entry under the same
  // key is dropped. If the parent entry is gone (or `parent` is broken),
  // nothing is registered and the returned cursor is broken.
  ChainCursor Register(int32_t block, const ChainCursor& parent,
                       const Salt& salt);

  // Drops the entry of registered block `block`; a cached block becomes
  // free.
  void Erase(int32_t block);
  // Drops every entry.
  void Clear();

  int32_t size() const { return static_cast<int32_t>(map_.size()); }
  // The block registered under `key`, or -1.
  int32_t Find(const BlockKey& key) const;
  // Precondition: the pool marks `block` registered.
  const Entry& entry(int32_t block) const { return entries_[block]; }

  // Map and entries agree with each other and with the pool's registered
  // bits; every key equals the hash of its entry's parent key, salt and
  // stored tokens; node ids are unique. O(size). With `pool_shared` (other
  // caches register blocks of the same pool: a pager's layer groups), the
  // count of registered blocks is the owner's to check.
  absl::Status CheckConsistency(bool pool_shared = false) const;

 private:
  bool Verified(int32_t block, uint64_t parent_node, uint32_t salt_id,
                absl::Span<const int32_t> tokens) const;

  BlockPool* const pool_;
  const BlockHashFn hash_;
  absl::flat_hash_map<BlockKey, int32_t> map_;
  std::vector<Entry> entries_;  // (num_blocks); valid where registered
  uint64_t next_node_ = 1;
  absl::flat_hash_map<std::string, uint32_t> salt_ids_;
  std::vector<BlockKey> salt_keys_;  // by salt id
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_PREFIX_CACHE_H_
