#include "engine/model/kv_layout.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace paceline::engine {

std::vector<int32_t> KvLayout::Windows() const {
  std::vector<int32_t> windows;
  for (const KvGroup& g : groups) {
    windows.push_back(static_cast<int32_t>(g.window));
  }
  return windows;
}

KvLayout PlanKvLayout(const ModelConfig& config, bool release_windows) {
  const int64_t n = config.n_layers;
  std::vector<int64_t> full, windowed;
  for (int64_t l = 0; l < n; ++l) {
    if (config.IsRecurrentLayer(l)) continue;  // no KV: a state slot
    (release_windows && config.IsSlidingLayer(l) ? windowed : full)
        .push_back(l);
  }
  KvLayout layout;
  layout.group_of_layer.assign(static_cast<size_t>(n), -1);
  layout.slot_of_layer.assign(static_cast<size_t>(n), -1);
  const int64_t smallest =
      full.empty() || windowed.empty()
          ? std::max<int64_t>(full.size(), windowed.size())
          : std::min<int64_t>(full.size(), windowed.size());
  layout.slots = std::max<int64_t>(smallest, 1);
  const auto add = [&](const std::vector<int64_t>& layers, int64_t window) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % layout.slots == 0) layout.groups.push_back(KvGroup{window, {}});
      KvGroup& g = layout.groups.back();
      layout.group_of_layer[layers[i]] = layout.num_groups() - 1;
      layout.slot_of_layer[layers[i]] = static_cast<int32_t>(g.layers.size());
      g.layers.push_back(layers[i]);
    }
  };
  add(full, 0);
  add(windowed, config.sliding_window);
  if (layout.groups.empty()) layout.groups.push_back(KvGroup{});
  return layout;
}

int64_t GroupBlocksToHold(int64_t window, int64_t block_size,
                          int64_t positions, int64_t step_tokens) {
  const int64_t all = (positions + block_size - 1) / block_size;
  if (window <= 0) return all;
  // Positions [c - window + 1, c + step): window - 1 + step of them, over
  // at most one block more than they fill when unaligned.
  const int64_t span = window - 1 + std::max<int64_t>(step_tokens, 1);
  return std::min(all, (span + block_size - 1) / block_size + 1);
}

int64_t BlocksToHold(const KvLayout& layout, int64_t block_size,
                     int64_t positions, int64_t step_tokens) {
  int64_t blocks = 0;
  for (const KvGroup& g : layout.groups) {
    blocks += GroupBlocksToHold(g.window, block_size, positions, step_tokens);
  }
  return blocks;
}

}  // namespace paceline::engine
