#ifndef PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_
#define PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace paceline::engine::cuda {

// y[i] = alpha * x[i] + beta for i in [0, n), on `stream`. x, y: device
// pointers of n floats (may alias). Returns the launch error, if any.
cudaError_t LaunchAffine(const float* x, float* y, int64_t n, float alpha,
                         float beta, cudaStream_t stream);

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_SCALE_H_
