#ifndef PACELINE_ENGINE_CUDA_KERNELS_EMBEDDING_H_
#define PACELINE_ENGINE_CUDA_KERNELS_EMBEDDING_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// out[t, :] = float(table[tokens[t], :]) for t in [0, n_tokens). Token ids
// must be in [0, n_vocab) (the engine checks them on the host).
//   table:  (n_vocab, dim) of `dtype`
//   tokens: (n_tokens) int32
//   out:    (n_tokens, dim) float
cudaError_t LaunchEmbedding(GgmlType dtype, const void* table,
                            const int32_t* tokens, int64_t n_tokens,
                            int64_t dim, float* out, cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_EMBEDDING_H_
