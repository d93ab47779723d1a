#ifndef PACELINE_ENGINE_CPU_OPS_H_
#define PACELINE_ENGINE_CPU_OPS_H_

// The element-wise and per-row operations of a Llama-family layer, on
// row-major float tensors: RMSNorm, RoPE (both layouts, any scaling),
// bias add, SwiGLU, residual add. Plain loops; the matmuls and attention
// carry the cost. None allocates. In-place use is allowed where noted.

#include <cstdint>

#include "absl/types/span.h"
#include "engine/model/model_config.h"
#include "engine/model/rope_table.h"

namespace paceline::engine::cpu {

// out[r, i] = x[r, i] / sqrt(mean_i(x[r, :]^2) + eps) * w[i]; the sum of
// squares is accumulated in double. out may equal x.
//   x:   (n_rows, dim)
//   w:   (dim)
//   out: (n_rows, dim)
void RmsNorm(const float* x, const float* w, int64_t n_rows, int64_t dim,
             float eps, float* out);

// x[r, :] += bias
//   x:    (n_rows, dim)
//   bias: (dim)
void AddBias(float* x, const float* bias, int64_t n_rows, int64_t dim);

// x[i] += y[i]
//   x, y: (n)
void AddInPlace(float* x, const float* y, int64_t n);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)), exp by
// ExpRow (kernels/vector_math.h: within 2 ulp, vectorized). out may equal
// gate or up.
//   gate, up, out: (n)
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) * up[i], GELU with the tanh approximation:
// gelu(g) = g/2 (1 + tanh(sqrt(2/pi) g (1 + 0.044715 g^2))), computed the
// way llama.cpp's CPU GeGLU does (its F16 table): g rounded to F16 and the
// GELU rounded to F16 for -10 < g < 10; 0 below, g itself above. (Exact
// float GELU measured 0.11 of the logit std from llama.cpp's logits on
// the Q4_K_M Gemma 3 oracle file, this 0.055.) out may equal gate or up.
//   gate, up, out: (n)
void GeluTanhGlu(const float* gate, const float* up, int64_t n, float* out);

// gpt-oss's clamped SwiGLU, as llama.cpp's swiglu_oai computes it: with
// g = min(gate[i], 7) and u = clamp(up[i], -7, 7),
//   out[i] = g / (1 + exp(-1.702 g)) * (u + 1).
// out may equal gate or up.
//   gate, up, out: (n)
void SwigluOai(const float* gate, const float* up, int64_t n, float* out);

// The gated activation `activation` names (SwiGlu, GeluTanhGlu, SwigluOai).
void GatedActivation(FfnActivation activation, const float* gate,
                     const float* up, int64_t n, float* out);

struct RopeParams {
  RopeLayout layout = RopeLayout::kAdjacentPairs;
  int64_t rope_dim = 0;  // rotated dims per head, even, <= head_dim
  // Per-pair frequencies (rope_dim / 2) and the magnitude of the rotated
  // pairs, with every scaling folded in (engine/model/rope_table.h).
  RopeTable table;
};

// The config's RoPE; `freq_factors` as MakeRopeTable takes them (the
// file's rope_freqs.weight, or empty). The config must pass
// CheckRopeConfig (ModelWeights checks it at load).
RopeParams RopeParamsFromConfig(const ModelConfig& config,
                                absl::Span<const float> freq_factors = {});

// The RoPE of the config's sliding-window layers: base
// rope_freq_base_swa, no scaling (llama.cpp's SWA layers).
RopeParams SlidingRopeParams(const ModelConfig& config);

// The rotation of each token: pair i of a token at position p turns by
// theta = p * table.inv_freq[i] (double), stored as mscale * cos(theta)
// and mscale * sin(theta).
//   positions: (n_tokens)
//   cos, sin:  (n_tokens, rope_dim / 2)
void RopeAngles(const int32_t* positions, int64_t n_tokens,
                const RopeParams& params, float* cos, float* sin);

// Rotates every head of every token in place with the token's angles. Pair
// i is (x[2i], x[2i+1]) for kAdjacentPairs and (x[i], x[i + rope_dim/2])
// for kNeoxHalves; dims from rope_dim to head_dim pass through.
//   x:        (n_tokens, n_heads, head_dim)
//   cos, sin: (n_tokens, rope_dim / 2)
void ApplyRope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
               const RopeParams& params, const float* cos, const float* sin);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_OPS_H_
