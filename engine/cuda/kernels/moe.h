#ifndef PACELINE_ENGINE_CUDA_KERNELS_MOE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_MOE_H_

// The mixture-of-experts steps around the expert GEMMs (cuda_engine.h):
// routing on the device, then — once the host has grouped the (token,
// rank) rows by expert — gathering each expert's input rows into one block
// and adding the weighted expert outputs back to the residual stream.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// Per token: softmax over the router logits, the k most probable experts
// (a tie to the lower index; NaN as -inf), in descending order, weights
// renormalised over those k in double — exactly cpu::RouteTokens
// (cpu/moe_ffn.h). One thread per token.
//   logits:  (n_tokens, n_expert) float
//   experts: (n_tokens, k) int32
//   weights: (n_tokens, k) float
cudaError_t LaunchMoeRoute(const float* logits, int64_t n_tokens,
                           int64_t n_expert, int64_t k, int32_t* experts,
                           float* weights, cudaStream_t stream);

// out[r, :] = x[row_token[r], :]
//   x:         (n_tokens, dim) of `dtype`
//   row_token: (rows) int32
//   out:       (rows, dim) of `dtype`
cudaError_t LaunchMoeGather(GgmlType dtype, const void* x,
                            const int32_t* row_token, int64_t rows, int64_t dim,
                            void* out, cudaStream_t stream);

// x[t, :] += sum over j in 0..k-1 (in this order) of
//            weights[t, j] * y[row_of[t, j], :]
// The fixed rank order makes a token's sum independent of the batch.
//   y:       (rows, dim) float, the experts' outputs
//   row_of:  (n_tokens, k) int32
//   weights: (n_tokens, k) float
//   x:       (n_tokens, dim) float
cudaError_t LaunchMoeCombine(const float* y, const int32_t* row_of,
                             const float* weights, int64_t n_tokens, int64_t k,
                             int64_t dim, float* x, cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_MOE_H_
