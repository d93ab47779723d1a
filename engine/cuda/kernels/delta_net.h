#ifndef PACELINE_ENGINE_CUDA_KERNELS_DELTA_NET_H_
#define PACELINE_ENGINE_CUDA_KERNELS_DELTA_NET_H_

// The recurrent half of a Gated DeltaNet layer (model/layer_program.h's
// kDeltaNet), between its input projections and ssm_out, for every slice
// of a step: the causal convolution with its state, then per value head
// the gated delta rule and the gated RMSNorm, a token at a time, as the
// CPU engine's cpu/delta_net.h (the same math; the CPU's is the reference
// of the kernel tests).
//
// A slice's state lives in its state slot, float32; this layer's part of
// a slot: the convolution's last K-1 inputs (K-1, conv_dim), oldest first,
// then per value head its (d, d) matrix S stored transposed (element
// (i, j), output feature i, key feature j, at j * d + i: a thread per
// output feature reads consecutive floats). Where a slice starts at
// position 0 its state reads as zeros (and is then overwritten): nothing
// needs clearing beforehand.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// A step's slices as the DeltaNet kernels read them: per slice four int32,
// token_begin, token_count, state_slot, position_begin.
inline constexpr int64_t kDeltaNetSliceInts = 4;
inline constexpr int64_t kMaxDeltaNetHeadDim = 1024;  // ModelConfig's bound
inline constexpr int64_t kMaxDeltaNetConvKernel = 64;

struct DeltaNetConvParams {
  int64_t n_slices = 0;
  const int32_t* slices = nullptr;  // (n_slices, kDeltaNetSliceInts)
  int64_t conv_dim = 0;             // channels
  int64_t kernel = 0;               // taps K, 2 .. kMaxDeltaNetConvKernel
  const float* w = nullptr;         // (conv_dim, K), oldest input first
  // (n_tokens, x_stride): the q/k/v projection in columns [0, conv_dim)
  const float* x = nullptr;
  int64_t x_stride = 0;
  float* out = nullptr;  // (n_tokens, conv_dim) silu(conv(x))
  // Slot s's convolution state at states + s * slot_stride:
  // (K-1, conv_dim).
  float* states = nullptr;
  int64_t slot_stride = 0;
};

// One thread per (slice, channel): out row t, channel c =
// silu(sum_j in[t + j - (K-1), c] · w[c·K + j]), in[-i] the state's row
// K-1-i; then the state holds the slice's last K-1 inputs.
// cudaErrorInvalidValue for K outside [2, kMaxDeltaNetConvKernel] or more
// than 65535 slices.
cudaError_t LaunchDeltaNetConv(const DeltaNetConvParams& p,
                               cudaStream_t stream);

struct DeltaNetRuleParams {
  int64_t n_slices = 0;
  const int32_t* slices = nullptr;  // (n_slices, kDeltaNetSliceInts)
  int64_t k_heads = 0;              // key (and query) heads
  int64_t v_heads = 0;              // value heads, a multiple of k_heads
  int64_t head_dim = 0;             // d, <= kMaxDeltaNetHeadDim
  bool grouped = false;  // value head h reads key head h / (v/k), else h % k
  // beta and alpha laid out per key head (qwen3next's ssm_ba: key head g's
  // r = v/k betas, then its r alphas, for value heads g r .. g r + r - 1);
  // else v_heads betas, then v_heads alphas.
  bool fused_ba = false;
  float eps = 1e-6f;  // the L2 norms and the output RMSNorm
  // (n_tokens, conv_dim) the convolution's output: q heads, k heads, v heads
  const float* conv = nullptr;
  // (n_tokens, in_stride): the gate z (v_heads · d) at column z_col, the
  // beta and alpha logits (2 v_heads) at column ba_col
  const float* in = nullptr;
  int64_t in_stride = 0;
  int64_t z_col = 0;
  int64_t ba_col = 0;
  const float* ssm_a = nullptr;    // (v_heads) -exp(A_log)
  const float* dt_bias = nullptr;  // (v_heads)
  const float* norm = nullptr;     // (d) ssm_norm
  // Slot s's value-head matrices at states + s * slot_stride:
  // (v_heads, d, d), each transposed (above).
  float* states = nullptr;
  int64_t slot_stride = 0;
  void* out = nullptr;  // (n_tokens, v_heads · d) of `dtype`
};

// One block per (value head, slice), a thread per output feature, the
// slice's tokens in order: q, k L2-normalised (q also by 1/sqrt(d)),
// beta = sigmoid(b), decay = exp(softplus(a + dt_bias) · ssm_a);
// S ← decay S; S ← S + beta (v − S k) kᵀ; o = S q;
// out = RMSNorm(o) · norm · silu(z). cudaErrorInvalidValue for d over
// kMaxDeltaNetHeadDim or more than 65535 slices.
cudaError_t LaunchDeltaNetRule(GgmlType dtype, const DeltaNetRuleParams& p,
                               cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_DELTA_NET_H_
