#ifndef PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_
#define PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_

// The per-ISA pieces of PagedAttention (attention.cc picks one per call
// from EffectiveIsaLevel()). Call a function only at a level the CPU runs.

#include <algorithm>
#include <cstdint>

#include "absl/types/span.h"
#include "engine/cpu/kv_cache.h"

namespace paceline::engine::cpu::internal {

// Query rows handled together against one KV head's K/V (each K/V block
// is read once, from L1, for all of them): the heads of a GQA group, and
// the consecutive tokens of one sequence in a step (a prefill's). Larger
// groups go in several passes.
inline constexpr int64_t kMaxTileRows = 16;
inline constexpr int64_t kMaxAccFloats = 8192;  // kMaxTileRows * head_dim cap

// A place in one block's Q8_0 K or V rows (kv_cache.h): element i of the
// rows that start at `base`, which are whole 32-element blocks of 34 bytes
// (an F16 scale, then 32 int8). The kernels index it as they index float
// rows (rows + j * head_dim + d) and load kLanes elements at a time from
// an i that is a multiple of kLanes, so a load never crosses a block.
struct Q8Rows {
  const uint8_t* base = nullptr;
  int64_t i = 0;

  Q8Rows operator+(int64_t n) const { return {base, i + n}; }
  // The block holding element i: its F16 scale's bytes, then its int8.
  const uint8_t* block() const { return base + (i >> 5) * 34; }
  const int8_t* q() const {
    return reinterpret_cast<const int8_t*>(block() + 2) + (i & 31);
  }
};

// A block's K (which = 0) or V (1) rows of one layer and KV head, as the
// kernels read them: float rows of an F32 cache, Q8Rows of a Q8_0 one.
template <typename Rows>
Rows BlockRows(const KvCache& cache, int64_t layer, int64_t block,
               int64_t which, int64_t kv_head);
template <>
inline const float* BlockRows<const float*>(const KvCache& cache, int64_t layer,
                                            int64_t block, int64_t which,
                                            int64_t kv_head) {
  return cache.Rows<float>(layer, block, which, kv_head);
}
template <>
inline Q8Rows BlockRows<Q8Rows>(const KvCache& cache, int64_t layer,
                                int64_t block, int64_t which, int64_t kv_head) {
  return {cache.Rows<uint8_t>(layer, block, which, kv_head), 0};
}

// Blocks ahead of the one being read whose K/V rows the kernels prefetch.
// A KV head's rows of consecutive blocks lie n_kv_heads * 2 chunks apart
// (and blocks are scattered over the pool), so the hardware prefetchers
// do not follow a long context's stream; without this, decode at 16k
// positions read K/V at a quarter of the DRAM rate.
inline constexpr int64_t kPrefetchBlocks = 2;

// Asks for the rows of one layer, block, K or V (which) and KV head to be
// brought into the caches.
inline void PrefetchRows(const KvCache& cache, int64_t layer, int64_t block,
                         int64_t which, int64_t kv_head) {
  const auto* p = cache.Rows<uint8_t>(layer, block, which, kv_head);
  const int64_t bytes =
      cache.shape().block_size * static_cast<int64_t>(KvCache::RowBytes(
                                     cache.dtype(), cache.shape().head_dim));
  for (int64_t offset = 0; offset < bytes; offset += 64) {
    __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
  }
}

// PrefetchRows for the block kPrefetchBlocks after logical block `index`
// of `block_table` (the blocks being read), when there is one.
inline void PrefetchAhead(const KvCache& cache, int64_t layer,
                          absl::Span<const int32_t> block_table, int64_t index,
                          int64_t which, int64_t kv_head) {
  const int64_t ahead = index + kPrefetchBlocks;
  if (ahead < static_cast<int64_t>(block_table.size())) {
    PrefetchRows(cache, layer, block_table[ahead], which, kv_head);
  }
}

// The query rows of one work item: n_tokens consecutive tokens of one
// sequence, each with n_group consecutive query heads, which read KV heads
// kv_head, kv_head + 1, ... in turn, heads_per_kv of them each (0: all
// n_group read kv_head). Row (i, g) reads KV head kv_head + g /
// HeadsPerKv() and is
//   q   + i * token_stride + g * head_dim   (head_dim floats), its result
//   out + i * token_stride + g * head_dim,
// and token i attends to positions [First(i), positions[i]] (attention.h's
// window). n_tokens * n_group <= kMaxTileRows and n_tokens * n_group *
// head_dim <= kMaxAccFloats. Each row's result is computed by the same
// operations, in the same order, as if it were alone in its tile.
struct QueryTile {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t token_stride = 0;            // n_heads * head_dim
  const int32_t* positions = nullptr;  // (n_tokens)
  int64_t n_tokens = 0;
  int64_t n_group = 0;
  int64_t window = 0;            // 0: none
  const float* sinks = nullptr;  // (n_group) of the tile's heads, or null
  int64_t heads_per_kv = 0;      // divides n_group; 0: n_group

  int64_t HeadsPerKv() const {
    return heads_per_kv > 0 ? heads_per_kv : n_group;
  }
  // How many KV heads the tile reads (from kv_head on).
  int64_t KvHeads() const { return n_group / HeadsPerKv(); }

  // The end of the positions token i reads: positions[i] + 1.
  int64_t Length(int64_t i) const { return int64_t{positions[i]} + 1; }
  // The first position token i reads.
  int64_t First(int64_t i) const {
    return window > 0 ? std::max<int64_t>(0, positions[i] - window + 1) : 0;
  }
  int64_t MaxLength() const {
    int64_t n = 0;
    for (int64_t i = 0; i < n_tokens; ++i) n = std::max(n, Length(i));
    return n;
  }
  int64_t MinFirst() const {
    int64_t first = MaxLength();
    for (int64_t i = 0; i < n_tokens; ++i) first = std::min(first, First(i));
    return first;
  }
  // Token i's positions within the block that starts at `start` (of
  // block_size): slots [*lo, *hi), empty when *lo >= *hi.
  void BlockSlots(int64_t i, int64_t start, int64_t block_size, int64_t* lo,
                  int64_t* hi) const {
    *lo = std::max<int64_t>(0, First(i) - start);
    *hi = std::min(block_size, Length(i) - start);
  }
  // Row (i, g)'s offset into q and out, in floats.
  int64_t RowOffset(int64_t i, int64_t g, int64_t head_dim) const {
    return i * token_stride + g * head_dim;
  }
};

using AttendTileFn = void (*)(const KvCache& cache, int64_t layer,
                              int64_t kv_head,
                              absl::Span<const int32_t> block_table,
                              const QueryTile& tile, int64_t head_dim,
                              float scale);

// F32 and Q8_0 caches: per block of each row, the scores of all its
// positions, a tile of 8 (AVX2) or 16 (AVX-512) positions at a time; one
// vectorized exp (below) over them; then P·V (Q8_0 elements widened to
// float and scaled as they load). F16 cache: every score of the tile's
// rows first, one softmax per row, then P·V (attention.h).
// attention_group.inc has the loops.
void AttendTileAvx2(const KvCache& cache, int64_t layer, int64_t kv_head,
                    absl::Span<const int32_t> block_table,
                    const QueryTile& tile, int64_t head_dim, float scale);
void AttendTileAvx512(const KvCache& cache, int64_t layer, int64_t kv_head,
                      absl::Span<const int32_t> block_table,
                      const QueryTile& tile, int64_t head_dim, float scale);

// y[i] = exp(x[i]) for i < n, as the kernels compute it: within 2 ulp of
// the correctly rounded result (1 in practice) for every finite x,
// including subnormal results (unless the thread flushes them); 0 below
// about -103.97, +inf above about 88.72, NaN for NaN. For tests.
void ExpAvx2(const float* x, int64_t n, float* y);
void ExpAvx512(const float* x, int64_t n, float* y);

}  // namespace paceline::engine::cpu::internal

#endif  // PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_
