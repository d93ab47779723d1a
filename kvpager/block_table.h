#ifndef PACELINE_KVPAGER_BLOCK_TABLE_H_
#define PACELINE_KVPAGER_BLOCK_TABLE_H_

// What the scheduler and the engine see of a sequence's KV memory: values,
// never the pool's internals (vLLM's KVCacheBlocks idea).
//
// Token position p of a sequence lives in physical block
// block_ids[p / block_size], slot p % block_size. The engine takes these
// values as they are: SequenceSlice::block_table (engine/forward_batch.h)
// is `block_ids`, and Engine::CopyBlocks (engine/engine.h) runs BlockCopy.

#include <cstdint>

#include "absl/types/span.h"

namespace paceline::kvpager {

// The entry of a block table where a windowed group holds no block: one
// it gave back (wholly before every later position's window) or one it has
// not taken yet (past the positions a step has asked for). Attention never
// reads such entries (kv_pager.h, "layer groups").
inline constexpr int32_t kNoBlock = -1;

// A view of one sequence's block table. It borrows the lease's storage: it
// stays valid until the lease is next appended to, moved, freed or
// destroyed (hold it for one step, never across pager calls).
struct BlockTable {
  int32_t block_size = 0;
  int32_t num_tokens = 0;
  // Physical block of each logical block: (ceil(num_tokens / block_size)).
  absl::Span<const int32_t> block_ids;

  int32_t num_blocks() const { return static_cast<int32_t>(block_ids.size()); }

  // The flat KV slot of token position `position` (0 <= position <
  // num_blocks() * block_size): physical block * block_size + offset, as
  // in vLLM's slot mapping.
  int64_t Slot(int32_t position) const {
    return int64_t{block_ids[position / block_size]} * block_size +
           position % block_size;
  }
};

// A copy the engine must perform: every slot of physical block `src` (all
// its layers, K and V) into physical block `dst`. Produced by copy-on-write
// when a sequence first writes into a partial block it shares with a fork.
// Run the step's copies first, before its forward pass writes any K/V:
// `src` may be released by its last other holder later in the same
// scheduling step and handed to another sequence, whose writes come only
// with the forward pass.
struct BlockCopy {
  int32_t src = -1;
  int32_t dst = -1;

  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

// A copy of one recurrent-state slot (hybrid models: a sequence's state in
// every DeltaNet layer) into another: a fork's, or a cached prefix's
// snapshot into the sequence that reuses it. Run with the step's block
// copies, before its forward pass.
struct StateCopy {
  int32_t src = -1;
  int32_t dst = -1;

  friend bool operator==(const StateCopy&, const StateCopy&) = default;
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_BLOCK_TABLE_H_
