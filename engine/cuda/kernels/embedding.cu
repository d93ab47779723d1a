// Embedding gather: one block per token copies its row, widening to float.
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/embedding.h"
#include "engine/cuda/kernels/launch.cuh"

namespace paceline::engine::cuda {
namespace {

template <typename T>
__global__ void EmbeddingKernel(const T* table,         // (n_vocab, dim)
                                const int32_t* tokens,  // (n_tokens)
                                int64_t dim,
                                float* out) {  // (n_tokens, dim)
  const int64_t t = blockIdx.x;
  const T* row = table + static_cast<int64_t>(tokens[t]) * dim;
  float* o = out + t * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = ToFloat(row[i]);
}

}  // namespace

cudaError_t LaunchEmbedding(GgmlType dtype, const void* table,
                            const int32_t* tokens, int64_t n_tokens,
                            int64_t dim, float* out, cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(EmbeddingKernel<T>, static_cast<unsigned>(n_tokens), 256,
                   stream, static_cast<const T*>(table), tokens, dim, out));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
