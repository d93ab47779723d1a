// SwiGLU: element-wise over (token, feature), a grid-stride loop.
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

}  // namespace

cudaError_t LaunchSwiGlu(GgmlType dtype, const float* gate_up, int64_t n_tokens,
                         int64_t n_ff, void* out, cudaStream_t stream) {
  const int64_t total = n_tokens * n_ff;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > 65535) blocks = 65535;
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(SwiGluKernel<T>, static_cast<unsigned>(blocks), kThreads,
                   stream, gate_up, n_tokens, n_ff, static_cast<T*>(out)));
  return cudaGetLastError();
}

}  // namespace paceline::engine::cuda
