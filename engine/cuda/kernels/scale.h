#ifndef PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace paceline::engine::cuda {

// y[i] = alpha * x[i] + beta for i in [0, n), on `stream`. x, y: device
// pointers of n floats (may alias). Returns the launch error, if any.
cudaError_t LaunchAffine(const float* x, float* y, int64_t n, float alpha,
                         float beta, cudaStream_t stream);

// y[r, i] += bias[i] for r in [0, n_rows), i in [0, dim): a matmul's bias
// (gpt-oss's attention output, router and experts).
//   bias: (dim) float
//   y:    (n_rows, ldy) float, ldy >= dim
cudaError_t LaunchAddRowBias(const float* bias, int64_t n_rows, int64_t dim,
                             float* y, int64_t ldy, cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_
