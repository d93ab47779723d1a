// y[i] = alpha * x[i] + beta: the smallest kernel that proves nvcc, the
// launch path and the device-side build of this project work; and a bias
// added to every row.
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

__global__ void AddRowBiasKernel(const float* bias,  // (dim)
                                 int64_t n_rows, int64_t dim,
                                 float* y,  // (n_rows, ldy)
                                 int64_t ldy) {
  const int64_t total = n_rows * dim;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / dim;
    const int64_t c = i - r * dim;
    y[r * ldy + c] += bias[c];
  }
}

}  // namespace

cudaError_t LaunchAddRowBias(const float* bias, int64_t n_rows, int64_t dim,
                             float* y, int64_t ldy, cudaStream_t stream) {
  const int64_t total = n_rows * dim;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > 65535) blocks = 65535;
  LaunchKernel(AddRowBiasKernel, static_cast<unsigned>(blocks), kThreads,
               stream, bias, n_rows, dim, y, ldy);
  return cudaGetLastError();
}

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
