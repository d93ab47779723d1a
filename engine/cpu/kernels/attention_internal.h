#ifndef PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_
#define PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_

// The per-ISA pieces of PagedAttention (attention.cc picks one per call
// from EffectiveIsaLevel()). Call a function only at a level the CPU runs.

#include <cstdint>

#include "absl/types/span.h"
#include "engine/cpu/kv_cache.h"

namespace paceline::engine::cpu::internal {

// Query heads handled together against one KV head's rows (GQA shares
// each K/V read among them); larger groups go in several passes.
inline constexpr int64_t kMaxGroup = 16;
inline constexpr int64_t kMaxAccFloats = 8192;  // kMaxGroup * head_dim cap

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
      cache.shape().block_size *
      static_cast<int64_t>(KvCache::RowBytes(cache.dtype(),
                                             cache.shape().head_dim));
  for (int64_t offset = 0; offset < bytes; offset += 64) {
    __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
  }
}

// Heads [head_begin, head_begin + n_group) of one token, all reading KV
// head `kv_head`, over positions [0, n_positions); n_group <= kMaxGroup,
// n_group * head_dim <= kMaxAccFloats.
//   q:   (n_group, head_dim) of this token
//   out: (n_group, head_dim)
using AttendGroupFn = void (*)(const KvCache& cache, int64_t layer,
                               int64_t kv_head,
                               absl::Span<const int32_t> block_table,
                               int64_t n_positions, const float* q,
                               int64_t n_group, int64_t head_dim, float scale,
                               float* out);

// F32 and Q8_0 caches: per block of each head, the scores of all its
// positions, a tile of 8 (AVX2) or 16 (AVX-512) positions at a time; one
// vectorized exp (below) over them; then P·V (Q8_0 elements widened to
// float and scaled as they load). F16 cache: every score of the group
// first, one softmax per head, then P·V (attention.h).
// attention_group.inc has the loops.
void AttendGroupAvx2(const KvCache& cache, int64_t layer, int64_t kv_head,
                     absl::Span<const int32_t> block_table, int64_t n_positions,
                     const float* q, int64_t n_group, int64_t head_dim,
                     float scale, float* out);
void AttendGroupAvx512(const KvCache& cache, int64_t layer, int64_t kv_head,
                       absl::Span<const int32_t> block_table,
                       int64_t n_positions, const float* q, int64_t n_group,
                       int64_t head_dim, float scale, float* out);

// y[i] = exp(x[i]) for i < n, as the kernels compute it: within 2 ulp of
// the correctly rounded result (1 in practice) for every finite x,
// including subnormal results (unless the thread flushes them); 0 below
// about -103.97, +inf above about 88.72, NaN for NaN. For tests.
void ExpAvx2(const float* x, int64_t n, float* y);
void ExpAvx512(const float* x, int64_t n, float* y);

}  // namespace paceline::engine::cpu::internal

#endif  // PACELINE_ENGINE_CPU_KERNELS_ATTENTION_INTERNAL_H_
