#ifndef PACELINE_ENGINE_CUDA_KERNELS_PAGED_ATTENTION_H_
#define PACELINE_ENGINE_CUDA_KERNELS_PAGED_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// Causal attention of a step's tokens over their sequences' paged K/V, for
// prefill chunks and decode tokens alike (the CPU engine's PagedAttention
// contract, attention.h): token t at positions[t] attends to its
// sequence's positions [first, positions[t]], first = 0 or, with a sliding
// window, max(0, positions[t] - window + 1), reading position p from block
// block_tables[table_offsets[t] + p / block_size], slot p % block_size.
// Query head h reads KV head h / (n_heads / n_kv_heads). For each (token,
// head):
//
//   out = sum_p softmax_p(scale * q · K[p]) V[p]
//
// with, when `sinks` is given, head h's sink logit e^(sinks[h] - m) added
// to the softmax's denominator only (unscaled; m the max of the sink and
// the scores), after the last position as llama.cpp's flash attention
// adds it. No K/V row (nor table entry) outside the step's windows is
// read: the pager may have released those blocks.
//
// K/V are read as floats (kv_dtype.cuh: a Q8_0 element is d * q, rounded
// once), so every cache type takes the same float path. Two kernels, both
// with an online softmax in float:
//  - per token: one CUDA block per (head, token, split); its warps take
//    positions in turn, then merge. When the step has few (token, head)
//    pairs (decode of a small batch), the context is split into num_splits
//    ranges whose partial results (max, sum, unnormalized output) a second
//    kernel merges, so long sequences fill the GPU.
//  - tiled (when `tiles` is given, head_dim <= 256): one block per (head,
//    query tile) of up to kAttentionTileTokens consecutive tokens of one
//    sequence; each chunk of K/V positions is read from the paged cache
//    once into shared memory for the whole tile (instead of once per
//    token), so a prefill chunk of n tokens reads its context n / 16 times
//    rather than n times.
struct PagedAttentionParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads
  int64_t head_dim = 0;    // <= kMaxAttentionHeadDim
  int64_t block_size = 16;
  float scale = 0;
  int64_t window = 0;            // sliding window in positions; 0 = none
  const float* sinks = nullptr;  // (n_heads) device logits, or null
  // Head h of token t is q[t * q_stride + h * head_dim .. + head_dim).
  const float* q = nullptr;
  int64_t q_stride = 0;
  const int32_t* positions = nullptr;      // (n_tokens)
  const int32_t* table_offsets = nullptr;  // (n_tokens) into block_tables
  const int32_t* block_tables = nullptr;   // (sum of table lengths)
  // This layer's blocks: (num_blocks, 2 (K, V), n_kv_heads, block_size)
  // rows of GgmlRowBytesOf(kv_dtype, head_dim) bytes (kv_dtype.cuh).
  const void* kv_layer = nullptr;
  void* out = nullptr;  // (n_tokens, n_heads, head_dim) of `dtype`
  // The largest positions[t] + 1 of the step (host-side knowledge).
  int64_t max_context = 0;
  // Scratch for split contexts: `partial_rows` rows of head_dim + 2 floats.
  float* partial = nullptr;
  int64_t partial_rows = 0;
  // 0: choose; k > 0: exactly k splits (tests), if partial holds them.
  int force_splits = 0;
  // Query tiles for the tiled kernel, or null: tiles[0] = the number of
  // tiles (<= n_tokens), then per tile its first token and its token count
  // (1 .. kAttentionTileTokens): consecutive tokens of one sequence at
  // consecutive positions. Device memory; every token in exactly one tile.
  const int32_t* tiles = nullptr;
};

inline constexpr int kAttentionTileTokens = 16;
inline constexpr int64_t kMaxTiledHeadDim = 256;

inline constexpr int64_t kMaxAttentionHeadDim = 512;

// How Launch runs `p`: tiled when it has tiles and head_dim allows; else
// each token's window (its whole context without one: the planning
// context is max_context, capped at the window) split into `splits`
// ranges (1 = no merge pass) of `split_len` positions:
// a multiple of 256 (unless forced), or unbounded when splits == 1 — so
// the plan changes only every few hundred positions of decode, and a
// captured CUDA graph stays valid in between.
struct PagedAttentionPlan {
  int splits = 1;
  int64_t split_len = 0;
  bool tiled = false;  // the tiled kernel (splits 1)
};
PagedAttentionPlan PlanPagedAttention(const PagedAttentionParams& p);

// PlanPagedAttention(p).splits.
int PagedAttentionSplits(const PagedAttentionParams& p);

// `dtype`: the output's element type; `kv_dtype`: the cache's (BF16 only
// with a BF16 `dtype`; Q8_0 with head_dim a multiple of 32), else
// cudaErrorInvalidValue.
cudaError_t LaunchPagedAttention(GgmlType dtype, GgmlType kv_dtype,
                                 const PagedAttentionParams& p,
                                 cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_PAGED_ATTENTION_H_
