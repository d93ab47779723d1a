#ifndef PACELINE_KVPAGER_BLOCK_POOL_H_
#define PACELINE_KVPAGER_BLOCK_POOL_H_

// The physical KV blocks: N blocks of B token slots each, a reference count
// per block, and the token ids each block holds (the host-side record of
// its content, compared on prefix-cache hits and copied on copy-on-write).
//
// Every block is in exactly one state:
//   kFree    ref 0, no cache entry, on the free list;
//   kUsed    ref >= 1 (referenced by that many live leases);
//   kCached  ref 0 but registered in the prefix cache: its content is kept
//            and it sits on the LRU list until reused by a hit or evicted.
// So free + used + cached = total, always.
//
// All operations are O(1): the free list is a stack, the LRU list is an
// intrusive doubly-linked list over the block array. The pool knows nothing
// about keys; PrefixCache flips the "registered" bit and KvPager decides
// when to evict.
//
// Thread-safety: none; owned by a KvPager, used from its thread.
// Preconditions on block ids and states are programming errors, checked by
// assert.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace paceline::kvpager {

enum class BlockState : uint8_t { kFree, kUsed, kCached };

class BlockPool {
 public:
  // num_blocks >= 1, block_size >= 1 (KvPager::Create validates). Blocks
  // start free; PopFree hands them out in id order 0, 1, 2, ...
  BlockPool(int32_t num_blocks, int32_t block_size);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_cached() const { return num_cached_; }
  int32_t num_used() const { return num_blocks_ - num_free() - num_cached_; }
  // Blocks an allocation can get: free ones, then evicted cached ones.
  int32_t num_available() const { return num_free() + num_cached_; }

  BlockState state(int32_t block) const { return meta_[block].state; }
  int32_t ref_count(int32_t block) const { return meta_[block].ref; }
  bool registered(int32_t block) const { return meta_[block].registered; }

  // A free block, now used with ref 1. Precondition: num_free() > 0.
  int32_t PopFree();
  // The least recently released cached block, unlinked from the LRU list
  // and now used with ref 1, still marked registered: the caller drops its
  // cache entry. Precondition: num_cached() > 0.
  int32_t PopLeastRecentlyUsed();
  // ref += 1; a cached block leaves the LRU list and becomes used.
  // Precondition: the block is not free.
  void AddRef(int32_t block);
  // ref -= 1; at 0 a registered block becomes cached (most recently used
  // end of the LRU list), any other block becomes free.
  // Precondition: the block is used.
  void Release(int32_t block);
  // Moves a cached block to the most recently used end of the LRU list.
  // Precondition: the block is cached.
  void Touch(int32_t block);
  // Marks whether the block holds a prefix-cache entry. Unregistering a
  // cached block frees it. Precondition: the block is not free.
  void SetRegistered(int32_t block, bool registered);

  // The block's token ids: block_size slots, of which a holder's first
  // (its num_tokens - block start) are meaningful.
  absl::Span<int32_t> tokens(int32_t block) {
    return absl::MakeSpan(tokens_).subspan(
        static_cast<size_t>(block) * block_size_, block_size_);
  }
  absl::Span<const int32_t> tokens(int32_t block) const {
    return absl::MakeConstSpan(tokens_).subspan(
        static_cast<size_t>(block) * block_size_, block_size_);
  }

  // Cached blocks, least recently used (next to evict) first. O(cached).
  std::vector<int32_t> CachedInLruOrder() const;

  // Checks every invariant above (states, counts, lists). O(num_blocks).
  absl::Status CheckConsistency() const;

 private:
  struct Meta {
    int32_t ref = 0;
    int32_t prev = -1;  // LRU links; the sentinel is index num_blocks_
    int32_t next = -1;
    BlockState state = BlockState::kFree;
    bool registered = false;
  };

  void LinkLruTail(int32_t block);
  void UnlinkLru(int32_t block);

  // Constant after construction.
  const int32_t num_blocks_;
  const int32_t block_size_;

  std::vector<Meta> meta_;     // (num_blocks + 1): the last is the sentinel
  std::vector<int32_t> free_;  // stack of free block ids
  int32_t num_cached_ = 0;
  std::vector<int32_t> tokens_;  // (num_blocks * block_size)
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_BLOCK_POOL_H_
