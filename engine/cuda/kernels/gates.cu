// The sigmoid gates (gates.h): element-wise grid-stride kernels, and the
// shared expert's gated add, one block per token.
#include <algorithm>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/gates.h"
#include "engine/cuda/kernels/launch.cuh"

namespace paceline::engine::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t total) {
  return static_cast<unsigned>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
}

__device__ __forceinline__ float Sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__global__ void SplitQueryGateKernel(const float* qg,  // (n, 2 q_dim + 2 kv)
                                     int64_t n_tokens, int64_t head_dim,
                                     int64_t q_dim, int64_t kv_dim,
                                     float* qkv,     // (n, q_dim + 2 kv)
                                     float* gate) {  // (n, q_dim)
  const int64_t in_width = 2 * q_dim + 2 * kv_dim;
  const int64_t out_width = q_dim + 2 * kv_dim;
  const int64_t total = n_tokens * in_width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / in_width;
    const int64_t c = i - t * in_width;
    const float x = qg[i];
    if (c >= 2 * q_dim) {
      qkv[t * out_width + c - q_dim] = x;
      continue;
    }
    const int64_t h = c / (2 * head_dim);
    const int64_t e = c - h * 2 * head_dim;
    if (e < head_dim) {
      qkv[t * out_width + h * head_dim + e] = x;
    } else {
      gate[t * q_dim + h * head_dim + e - head_dim] = x;
    }
  }
}

template <typename T>
__global__ void SigmoidGateKernel(T* x, const float* gate, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = FromFloat<T>(ToFloat(x[i]) * Sigmoid(gate[i]));
  }
}

template <typename T>
__global__ void SigmoidGatedAddKernel(const T* h,      // (n, dim)
                                      const float* w,  // (dim)
                                      const float* y,  // (n, dim)
                                      int64_t dim,
                                      float* x) {  // (n, dim)
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x;
  double dot = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    dot += static_cast<double>(ToFloat(h[t * dim + i])) * w[i];
  }
  dot = BlockSum(dot, scratch);
  const float scale = Sigmoid(static_cast<float>(dot));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    x[t * dim + i] += scale * y[t * dim + i];
  }
}

}  // namespace

cudaError_t LaunchSplitQueryGate(const float* qg, int64_t n_tokens,
                                 int64_t n_heads, int64_t head_dim,
                                 int64_t kv_dim, float* qkv, float* gate,
                                 cudaStream_t stream) {
  const int64_t q_dim = n_heads * head_dim;
  const int64_t total = n_tokens * (2 * q_dim + 2 * kv_dim);
  if (total <= 0) return cudaSuccess;
  LaunchKernel(SplitQueryGateKernel, Blocks(total), kThreads, stream, qg,
               n_tokens, head_dim, q_dim, kv_dim, qkv, gate);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidGate(GgmlType dtype, void* x, const float* gate,
                              int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(SigmoidGateKernel<T>, Blocks(n), kThreads, stream,
                   static_cast<T*>(x), gate, n));
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidGatedAdd(GgmlType dtype, const void* h, const float* w,
                                  const float* y, int64_t n_tokens, int64_t dim,
                                  float* x, cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(SigmoidGatedAddKernel<T>, static_cast<unsigned>(n_tokens),
                   kThreads, stream, static_cast<const T*>(h), w, y, dim, x));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
