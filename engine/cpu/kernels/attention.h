#ifndef PACELINE_ENGINE_CPU_KERNELS_ATTENTION_H_
#define PACELINE_ENGINE_CPU_KERNELS_ATTENTION_H_

// Causal attention of a step's tokens over their sequences' paged K/V.
//
// Token t of the step sits at positions[t] in sequence token_table[t] and
// attends to that sequence's positions [first, positions[t]], first = 0,
// or max(0, positions[t] - window + 1) with a sliding window (llama.cpp's
// standard SWA, Gemma 3 and gpt-oss: position p is masked when
// positions[t] - p >= window), reading K/V of
// position p from block block_table[p / block_size], slot p % block_size
// (kv_cache.h layout). With GQA, query head h reads KV head
// h / (n_heads / n_kv_heads). For each (token, head):
//
//   out = sum_p softmax_p(scale * q · K[p]) V[p]
//
// With attention sinks (gpt-oss), head h's learned logit sinks[h] joins
// the softmax's denominator only, unscaled (llama.cpp's soft_max with
// sinks): with s_p = scale * q · K[p] and m = max(sinks[h], max_p s_p),
//
//   out = sum_p e^(s_p - m) V[p] / (e^(sinks[h] - m) + sum_p e^(s_p - m)).
//
// Blocks holding no position of any window are never read (nor their
// block_table entries): the pager may have released them.
//
// computed block by block with an online softmax (running max and sum,
// rescaled once per block), in float. The result for a token depends only
// on its q and its sequence's K/V: not on the batch, the thread count or
// the order of work.
//
// With an F16 cache this is F16 attention, the way llama.cpp's CPU path
// computes it with its default F16 cache (flash attention off): both
// operands of each product are F16 and the sums float. q is rounded to F16
// before q · K; the softmax is taken over all of a head's scores at once
// (one max, one sum), and each normalized weight is rounded to F16 before
// it multiplies V; a sink enters that max and, after the scores' sum,
// that sum. (The online softmax of the F32 path would round
// different numbers: weights relative to a running max, unnormalized.)
//
// With an F32 or Q8_0 cache the sink joins the online softmax after the
// last block, as llama.cpp's flash-attention path adds it.
//
// With a Q8_0 cache it is the F32 computation over the elements the blocks
// hold (q × d, each product rounded once to float as it loads): q, scores
// and weights stay float. llama.cpp, whose quantized V cache needs flash
// attention, rounds q to Q8_0 for q · K instead.

#include <cstdint>

#include "absl/types/span.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/thread_pool.h"

namespace paceline::engine::cpu {

struct AttentionParams {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;        // divides n_heads
  int64_t head_dim = 0;          // <= ModelWeights::kMaxHeadDim
  float scale = 0;               // usually 1 / sqrt(head_dim)
  int64_t window = 0;            // sliding window in positions; 0 = none
  const float* sinks = nullptr;  // (n_heads) logits, or null = none
};

// Largest block_size the kernel handles (its per-block score buffer).
inline constexpr int64_t kMaxAttentionBlockSize = 256;

// q:            (n_tokens, n_heads, head_dim)
// positions:    (n_tokens) each token's position in its sequence
// token_table:  (n_tokens) index into block_tables of the token's sequence
// block_tables: (num_sequences) physical block of each logical block,
//               covering positions[t] + 1 positions for every token t
//               (entries of blocks wholly before every window unread)
// out:          (n_tokens, n_heads, head_dim); must not alias q
// Work is spread over `pool` by (KV head, run of up to 16 consecutive
// tokens of one sequence): each K/V block read serves every query head of
// the group and token of the run. When every run is short enough (decode),
// an item takes several consecutive KV heads (their rows of a block are
// contiguous), as many as spread the heads evenly over the threads. The
// caller has checked every argument (ids, coverage); nothing is checked
// here.
void PagedAttention(const KvCache& cache, int64_t layer,
                    const AttentionParams& params, const float* q,
                    int64_t n_tokens, const int32_t* positions,
                    const int32_t* token_table,
                    absl::Span<const absl::Span<const int32_t>> block_tables,
                    float* out, ThreadPool& pool);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KERNELS_ATTENTION_H_
