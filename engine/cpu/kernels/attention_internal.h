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

// F32 cache: per block of each head, the scores of all its positions, a
// tile of 8 (AVX2) or 16 (AVX-512) positions at a time; one vectorized exp
// (below) over them; then P·V. F16 cache: every score of the group first,
// one softmax per head, then P·V (attention.h). attention_group.inc has
// the loops.
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
