#ifndef PACELINE_ENGINE_CUDA_KERNELS_QKV_ROPE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_QKV_ROPE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// Everything between the fused QKV GEMM and attention, in one kernel: per
// token and head, in the CPU engine's order,
//   1. + bias (qwen2),
//   2. per-head RMSNorm of Q and K heads (qwen3; double sum, as CpuEngine),
//   3. RoPE of Q and K heads at the token's position: pair i turns by
//      theta = position * inv_freq[i] (double) and is scaled by mscale
//      (cos and sin as float(mscale * cos(theta)), as cpu::RopeAngles),
//      pairs (x[2i], x[2i+1]) or, with neox, (x[i], x[i + rope_dim/2]);
//      dims from rope_dim on pass through,
// then Q is written back in place and K, V go (encoded as `kv_dtype`,
// kv_dtype.cuh) into the token's paged slot. q_dim = n_heads * head_dim,
// kv_dim = n_kv_heads * head_dim; head_dim <= kMaxQkvHeadDim (and a
// multiple of 32 for Q8_0).
struct QkvRopeParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // even, <= head_dim
  bool neox = false;
  double mscale = 1.0;  // RopeTable::mscale
  float eps = 1e-6f;    // of the per-head norm
  // (rope_dim / 2) RopeTable::inv_freq: every scaling folded in
  const double* inv_freq = nullptr;
  const float* bias = nullptr;         // (q_dim + 2 kv_dim) or null
  const float* q_norm = nullptr;       // (head_dim) or null (then k_norm too)
  const float* k_norm = nullptr;       // (head_dim) or null
  const int32_t* positions = nullptr;  // (n_tokens)
  // (n_tokens) block * block_size + slot of each token's K/V
  const int32_t* slot_mapping = nullptr;
  int64_t block_size = 16;
  float* qkv = nullptr;  // (n_tokens, q_dim + 2 kv_dim): Q | K | V
  // This layer's blocks: (num_blocks, 2 (K, V), n_kv_heads, block_size)
  // rows of GgmlRowBytesOf(kv_dtype, head_dim) bytes.
  void* kv_layer = nullptr;
};

inline constexpr int64_t kMaxQkvHeadDim = 512;

// cudaErrorInvalidValue for a head_dim over kMaxQkvHeadDim, more than 65535
// tokens, or Q8_0 with head_dim % 32 != 0.
cudaError_t LaunchQkvRope(GgmlType kv_dtype, const QkvRopeParams& p,
                          cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_QKV_ROPE_H_
