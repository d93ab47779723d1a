// SwiGLU, GeGLU and SwiGLU-OAI: element-wise over (token, feature), a
// grid-stride loop.
#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/swiglu.h"

namespace paceline::engine::cuda {
namespace {

template <typename T>
__global__ void SwiGluKernel(const float* gate_up,  // (n_tokens, 2 * n_ff)
                             int64_t n_tokens, int64_t n_ff,
                             T* out) {  // (n_tokens, n_ff)
  const int64_t total = n_tokens * n_ff;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff;
    const int64_t f = i - t * n_ff;
    const float g = gate_up[t * 2 * n_ff + f];
    const float u = gate_up[t * 2 * n_ff + n_ff + f];
    out[i] = FromFloat<T>(g / (1.0f + expf(-g)) * u);
  }
}

__device__ __forceinline__ float RoundToHalf(float x) {
  return __half2float(__float2half_rn(x));
}

template <typename T>
__global__ void GeluTanhGluKernel(const float* gate_up,  // (n_tokens, 2 n_ff)
                                  int64_t n_tokens, int64_t n_ff,
                                  T* out) {  // (n_tokens, n_ff)
  const float k = 0.7978845608028654f;       // sqrt(2 / pi)
  const int64_t total = n_tokens * n_ff;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff;
    const int64_t f = i - t * n_ff;
    const float g = gate_up[t * 2 * n_ff + f];
    const float u = gate_up[t * 2 * n_ff + n_ff + f];
    float y;
    if (g <= -10.0f) {
      y = 0.0f;
    } else if (g >= 10.0f) {
      y = g * u;
    } else {
      const float x = RoundToHalf(g);
      const float gelu =
          0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
      y = RoundToHalf(gelu) * u;
    }
    out[i] = FromFloat<T>(y);
  }
}

template <typename T>
__global__ void SwigluOaiKernel(const float* gate_up,  // (n_tokens, 2 n_ff)
                                int64_t n_tokens, int64_t n_ff,
                                T* out) {  // (n_tokens, n_ff)
  constexpr float kAlpha = 1.702f;
  constexpr float kLimit = 7.0f;
  const int64_t total = n_tokens * n_ff;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff;
    const int64_t f = i - t * n_ff;
    const float g = fminf(gate_up[t * 2 * n_ff + f], kLimit);
    const float u =
        fminf(fmaxf(gate_up[t * 2 * n_ff + n_ff + f], -kLimit), kLimit);
    out[i] = FromFloat<T>(g / (1.0f + expf(kAlpha * -g)) * (u + 1.0f));
  }
}

int64_t ElementwiseBlocks(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return blocks > 65535 ? 65535 : blocks;
}

}  // namespace

cudaError_t LaunchSwiGlu(GgmlType dtype, const float* gate_up, int64_t n_tokens,
                         int64_t n_ff, void* out, cudaStream_t stream) {
  const int64_t total = n_tokens * n_ff;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = ElementwiseBlocks(total, kThreads);
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(SwiGluKernel<T>, static_cast<unsigned>(blocks), kThreads,
                   stream, gate_up, n_tokens, n_ff, static_cast<T*>(out)));
  return cudaGetLastError();
}

cudaError_t LaunchGeluTanhGlu(GgmlType dtype, const float* gate_up,
                              int64_t n_tokens, int64_t n_ff, void* out,
                              cudaStream_t stream) {
  const int64_t total = n_tokens * n_ff;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = ElementwiseBlocks(total, kThreads);
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(GeluTanhGluKernel<T>, static_cast<unsigned>(blocks),
                   kThreads, stream, gate_up, n_tokens, n_ff,
                   static_cast<T*>(out)));
  return cudaGetLastError();
}

cudaError_t LaunchSwigluOai(GgmlType dtype, const float* gate_up,
                            int64_t n_tokens, int64_t n_ff, void* out,
                            cudaStream_t stream) {
  const int64_t total = n_tokens * n_ff;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = ElementwiseBlocks(total, kThreads);
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(SwigluOaiKernel<T>, static_cast<unsigned>(blocks), kThreads,
                   stream, gate_up, n_tokens, n_ff, static_cast<T*>(out)));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
