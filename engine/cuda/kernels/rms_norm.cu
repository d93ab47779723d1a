// RMSNorm with an optional fused residual add and row gather, and the
// residual add between two norms: one block per row, each row's sums of
// squares reduced in double over the block. Every element is read and
// written by one thread, so a norm may run in place.
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/rms_norm.h"

namespace paceline::engine::cuda {
namespace {

template <typename T>
__global__ void RmsNormKernel(float* x,               // (rows, dim)
                              const float* residual,  // (rows, dim) or null
                              const int32_t* rows,    // (n_rows) or null
                              int64_t dim, const float* w,  // (dim)
                              float eps, T* out) {          // (n_rows, dim)
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t s = rows != nullptr ? rows[r] : r;
  float* xr = x + s * dim;
  double sum = 0;
  if (residual != nullptr) {
    const float* rr = residual + s * dim;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = xr[i] + rr[i];
      xr[i] = v;
      sum += static_cast<double>(v) * v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      sum += static_cast<double>(xr[i]) * xr[i];
    }
  }
  sum = BlockSum(sum, scratch);
  const float scale = static_cast<float>(
      1.0 / sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps)));
  T* o = out + r * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    o[i] = FromFloat<T>(xr[i] * scale * w[i]);
  }
}

template <typename T>
__global__ void AddRmsNormKernel(float* y,                     // (rows, dim)
                                 const float* y_w,             // (dim) or null
                                 float* x,                     // (rows, dim)
                                 int64_t dim, const float* w,  // (dim) or null
                                 float eps, T* out) {          // (rows, dim)
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  float* yr = y + r * dim;
  float* xr = x + r * dim;
  float y_scale = 1.0f;
  if (y_w != nullptr) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      sum += static_cast<double>(yr[i]) * yr[i];
    }
    sum = BlockSum(sum, scratch);
    y_scale = static_cast<float>(
        1.0 / sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps)));
  }
  double sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float add = yr[i];
    if (y_w != nullptr) {
      add = add * y_scale * y_w[i];
      yr[i] = add;
    }
    const float v = xr[i] + add;
    xr[i] = v;
    sum += static_cast<double>(v) * v;
  }
  if (w == nullptr) return;  // uniform over the block
  sum = BlockSum(sum, scratch);
  const float scale = static_cast<float>(
      1.0 / sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps)));
  T* o = out + r * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    o[i] = FromFloat<T>(xr[i] * scale * w[i]);
  }
}

int NormThreads(int64_t dim) {
  return dim >= 1024 ? 1024 : (dim >= 256 ? 256 : 64);
}

}  // namespace

cudaError_t LaunchRmsNorm(GgmlType dtype, float* x, const float* residual,
                          const int32_t* rows, int64_t n_rows, int64_t dim,
                          const float* w, float eps, void* out,
                          cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  const int threads = NormThreads(dim);
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(RmsNormKernel<T>, static_cast<unsigned>(n_rows), threads,
                   stream, x, residual, rows, dim, w, eps,
                   static_cast<T*>(out)));
  return cudaGetLastError();
}

cudaError_t LaunchAddRmsNorm(GgmlType dtype, float* y, const float* y_w,
                             float* x, int64_t n_rows, int64_t dim,
                             const float* w, float eps, void* out,
                             cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(AddRmsNormKernel<T>, static_cast<unsigned>(n_rows),
                   NormThreads(dim), stream, y, y_w, x, dim, w, eps,
                   static_cast<T*>(out)));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
