#ifndef PACELINE_ENGINE_CUDA_KERNELS_GATES_H_
#define PACELINE_ENGINE_CUDA_KERNELS_GATES_H_

// The hybrid models' sigmoid gates (model/layer_program.h): gated
// attention's query/gate split and output gate, and the MoE's gated shared
// expert.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// Splits gated attention's projection (attn_q's rows hold per head
// head_dim query rows, then head_dim gate rows; then K and V) into Q|K|V
// and the gate, as cpu's SplitQueryGate. q_dim = n_heads · head_dim.
//   qg:   (n_tokens, 2 q_dim + 2 kv_dim) float
//   qkv:  (n_tokens, q_dim + 2 kv_dim) float
//   gate: (n_tokens, q_dim) float
cudaError_t LaunchSplitQueryGate(const float* qg, int64_t n_tokens,
                                 int64_t n_heads, int64_t head_dim,
                                 int64_t kv_dim, float* qkv, float* gate,
                                 cudaStream_t stream);

// x[i] = x[i] · sigmoid(gate[i]) for i in [0, n): attention's output gate.
//   x: (n) of `dtype`;  gate: (n) float
cudaError_t LaunchSigmoidGate(GgmlType dtype, void* x, const float* gate,
                              int64_t n, cudaStream_t stream);

// x[t] += sigmoid(h[t] · w) · y[t] per token t: the shared expert's output
// y scaled by its gate (ModelConfig::n_ff_shexp; the dot in double).
//   h: (n_tokens, dim) of `dtype`;  w: (dim) float
//   y, x: (n_tokens, dim) float
cudaError_t LaunchSigmoidGatedAdd(GgmlType dtype, const void* h, const float* w,
                                  const float* y, int64_t n_tokens, int64_t dim,
                                  float* x, cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_GATES_H_
