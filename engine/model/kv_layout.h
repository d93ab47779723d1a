#ifndef PACELINE_ENGINE_MODEL_KV_LAYOUT_H_
#define PACELINE_ENGINE_MODEL_KV_LAYOUT_H_

// How a model's layers share one pool of KV blocks (DESIGN.md §4, "sliding
// windows in the pager"; vLLM's hybrid KV cache manager). Layers are
// grouped by what they keep: every position (full history) or the last W
// positions (a sliding window). A block belongs to one group at a time and
// holds K and V of that group's layers only, one layer per slot; a sequence
// holds one block table per group, and a windowed group gives back the
// blocks no later position's window reaches (kvpager/kv_pager.h).
//
// All blocks have the same size, so the groups share one pool (whichever
// group needs blocks takes them): every group has at most `slots` layers,
// slots = the size of the smallest kind (full or windowed), and the larger
// kind is split into ceil(its layers / slots) groups of that many (the
// last one may leave slots empty). Gemma 3 4B (34 layers, 5 global): 5
// slots, one full group and six windowed groups (29 layers in 30 slots).
//
// Without windowed layers, or with release off, the layout is today's: one
// full group of every layer, slot = layer. A hybrid model's DeltaNet layers
// (ModelConfig::IsRecurrentLayer) keep no KV and have no slot: its blocks
// hold its attention layers only.

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace paceline::engine {

struct KvGroup {
  int64_t window = 0;           // positions kept; 0 = full history
  std::vector<int64_t> layers;  // (<= slots) model layers, by slot
};

struct KvLayout {
  int64_t slots = 0;  // layers per block
  std::vector<KvGroup> groups;  // (>= 1); groups[0] is full when any is
  // (n_layers) -1 for a DeltaNet layer (ModelConfig::IsRecurrentLayer),
  // which keeps no KV.
  std::vector<int32_t> group_of_layer;
  std::vector<int32_t> slot_of_layer;  // (n_layers) -1 as group_of_layer

  int32_t num_groups() const { return static_cast<int32_t>(groups.size()); }
  // The windows by group (KvPager::Create's and Engine::kv_group_windows).
  std::vector<int32_t> Windows() const;
};

// The layout of `config`'s layers: grouped as above when `release_windows`
// and some layer slides, else one full group.
KvLayout PlanKvLayout(const ModelConfig& config, bool release_windows);

// Blocks of `block_size` tokens one group holds for a sequence of
// `positions` positions at most: every block for a full group; for a
// windowed one those a step of up to `step_tokens` new positions needs
// besides the window before it (kvpager's BlocksToHold, the same bound).
int64_t GroupBlocksToHold(int64_t window, int64_t block_size,
                          int64_t positions, int64_t step_tokens);

// The sum over the layout's groups: the blocks one sequence holds.
int64_t BlocksToHold(const KvLayout& layout, int64_t block_size,
                     int64_t positions, int64_t step_tokens);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_KV_LAYOUT_H_
