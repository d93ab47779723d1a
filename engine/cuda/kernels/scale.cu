// y[i] = alpha * x[i] + beta: the smallest kernel that proves nvcc, the
// launch path and the device-side build of this project work.
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/scale.h"

namespace paceline::engine::cuda {
namespace {

__global__ void AffineKernel(const float* x,  // (n)
                             float* y,        // (n)
                             int64_t n, float alpha, float beta) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + beta;
}

}  // namespace

cudaError_t LaunchAffine(const float* x, float* y, int64_t n, float alpha,
                         float beta, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  LaunchKernel(AffineKernel, static_cast<unsigned>(blocks), kThreads, stream, x,
               y, n, alpha, beta);
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
