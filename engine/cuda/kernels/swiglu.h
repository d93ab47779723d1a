#ifndef PACELINE_ENGINE_CUDA_KERNELS_SWIGLU_H_
#define PACELINE_ENGINE_CUDA_KERNELS_SWIGLU_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, n_ff + i], with
// silu(g) = g / (1 + exp(-g)): the fused gate/up GEMM's output (gate
// columns first) into the down projection's input type.
//   gate_up: (n_tokens, 2 * n_ff) float
//   out:     (n_tokens, n_ff) of `dtype`
cudaError_t LaunchSwiGlu(GgmlType dtype, const float* gate_up, int64_t n_tokens,
                         int64_t n_ff, void* out, cudaStream_t stream);

// GeGLU (gemma3), the same layout: out[t, i] = gelu(g) * u, g =
// gate_up[t, i], u = gate_up[t, n_ff + i], with the tanh GELU computed as
// the CPU engine's cpu::GeluTanhGlu does (after llama.cpp's F16 table):
// 0 for g <= -10, g * u for g >= 10, else g rounded to F16, gelu(g) =
// g/2 (1 + tanh(sqrt(2/pi) g (1 + 0.044715 g^2))) rounded to F16, times u.
//   gate_up: (n_tokens, 2 * n_ff) float
//   out:     (n_tokens, n_ff) of `dtype`
cudaError_t LaunchGeluTanhGlu(GgmlType dtype, const float* gate_up,
                              int64_t n_tokens, int64_t n_ff, void* out,
                              cudaStream_t stream);

// gpt-oss's clamped SwiGLU, the same layout, as cpu::SwigluOai (llama.cpp's
// swiglu_oai): with g = min(gate, 7) and u = clamp(up, -7, 7),
// out[t, i] = g / (1 + exp(-1.702 g)) * (u + 1).
//   gate_up: (n_tokens, 2 * n_ff) float
//   out:     (n_tokens, n_ff) of `dtype`
cudaError_t LaunchSwigluOai(GgmlType dtype, const float* gate_up,
                            int64_t n_tokens, int64_t n_ff, void* out,
                            cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_SWIGLU_H_
