#ifndef PACELINE_KVPAGER_BLOCK_LEASE_H_
#define PACELINE_KVPAGER_BLOCK_LEASE_H_

// A sequence's hold on its KV blocks. KvPager::Allocate and KvPager::Fork
// create leases; KvPager::Append and KvPager::MarkComputed grow them.
//
// Ownership: a lease owns one reference to each block of its tables (and,
// in a pager with recurrent-state slots, its slot and any snapshot slot)
// and returns them when it is destroyed, reset or assigned over (TGI's
// block allocation with Drop). Cancelling, finishing or preempting a
// sequence is destroying its lease; nothing else frees blocks (or slots).
// Blocks are released last block first, so a finished prompt's tail is
// evicted before its head.
//
// Move-only. A moved-from lease is empty (owns nothing). A lease must be
// destroyed (or reset) before its pager, on the pager's thread.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "kvpager/block_table.h"
#include "kvpager/prefix_cache.h"

namespace paceline::kvpager {

class KvPager;

class BlockLease {
 public:
  // An empty lease.
  BlockLease() = default;

  BlockLease(BlockLease&& other) noexcept;
  BlockLease& operator=(BlockLease&& other) noexcept;
  BlockLease(const BlockLease&) = delete;
  BlockLease& operator=(const BlockLease&) = delete;

  ~BlockLease() { Reset(); }

  // Returns the blocks to the pager now; the lease becomes empty.
  void Reset();

  bool empty() const { return pager_ == nullptr; }

  // The sequence's block table, a view valid until the lease next changes
  // (block_table.h): that of group 0, the only group of a pager without
  // windowed groups.
  BlockTable table() const {
    return BlockTable{block_size_, num_tokens_, block_ids()};
  }
  absl::Span<const int32_t> block_ids() const {
    if (groups_.empty()) return {};
    return groups_[0].blocks;
  }
  // With more than one layer group (KvPager::num_groups()): each group's
  // table, group 0's first, (ceil(num_tokens / block_size)) entries each,
  // kNoBlock where a windowed group holds no block. Empty for a pager of
  // one group. Views valid until the lease next changes.
  absl::Span<const absl::Span<const int32_t>> group_tables() const {
    if (extra_ == nullptr) return {};
    return extra_->views;
  }
  // Blocks the lease holds, over every group.
  int32_t num_blocks() const;
  // Blocks it holds in `group`.
  int32_t num_blocks(int32_t group) const {
    return groups_[group].end - groups_[group].begin;
  }

  // The sequence's recurrent-state slot (SequenceSlice::state_slot), held
  // from Allocate or Fork until the lease is reset; -1 in a pager without
  // state slots (kv_pager.h).
  int32_t state_slot() const { return state_slot_; }
  // Its snapshot slot (KvPager::Snapshot) while it has one, else -1.
  int32_t snapshot_slot() const { return snapshot_slot_; }

  // Tokens the table covers: the prompt plus everything appended.
  int32_t num_tokens() const { return num_tokens_; }
  // Leading prompt tokens whose K/V came from the prefix cache at
  // admission: a multiple of the block size, at most num_tokens() - 1. The
  // sequence starts computing at this position. A fork copies its source's.
  int32_t num_cached_tokens() const { return num_cached_tokens_; }
  // The most tokens reported computed (KvPager::MarkComputed), or
  // num_cached_tokens() if more.
  int32_t num_computed_tokens() const { return num_computed_tokens_; }

 private:
  friend class KvPager;

  // One layer group's table. Entries [begin, end) hold blocks (one
  // reference each); the others are kNoBlock: before `begin` given back by
  // a windowed group, from `end` on not taken yet (a full group always has
  // begin 0 and end = blocks.size()).
  struct Group {
    std::vector<int32_t> blocks;  // (ceil(num_tokens / block_size))
    int32_t begin = 0;
    int32_t end = 0;
    ChainCursor chain;  // the full blocks registered so far
  };

  // Leaves the lease empty without releasing anything.
  void Clear();
  // Points extra_->views at the groups' tables (more than one group only).
  void RefreshViews();

  KvPager* pager_ = nullptr;
  int32_t block_size_ = 0;
  int32_t num_tokens_ = 0;
  int32_t num_cached_tokens_ = 0;
  int32_t num_computed_tokens_ = 0;
  int32_t state_slot_ = -1;
  int32_t snapshot_slot_ = -1;
  // (the pager's groups); one lives in the lease itself (no indirection
  // on the decode path of a model without windows).
  absl::InlinedVector<Group, 1> groups_;
  Salt salt_;
  // With several groups or a windowed one; null otherwise, which keeps
  // the lease small on the decode path of a model without windows.
  struct Extra {
    std::vector<absl::Span<const int32_t>> views;  // (groups) when several
    // With windowed groups: the sequence's tokens, which a block taken
    // after admission records (prefix-cache keys).
    std::vector<int32_t> tokens;  // (num_tokens) or empty
  };
  std::unique_ptr<Extra> extra_;
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_BLOCK_LEASE_H_
