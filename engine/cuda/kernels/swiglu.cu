// SwiGLU, GeGLU and SwiGLU-OAI: one element-wise kernel over (token,
// feature), a grid-stride loop, per gate.
#include <algorithm>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/launch.cuh"
#include "engine/cuda/kernels/swiglu.h"

namespace paceline::engine::cuda {
namespace {

__device__ __forceinline__ float RoundToHalf(float x) {
  return __half2float(__float2half_rn(x));
}

// The gates (swiglu.h): each maps a gate value g and an up value u to
// the down projection's input.
struct Silu {
  __device__ float operator()(float g, float u) const {
    return g / (1.0f + expf(-g)) * u;
  }
};

struct GeluTanhF16 {
  __device__ float operator()(float g, float u) const {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g * u;
    const float x = RoundToHalf(g);
    const float gelu =
        0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
    return RoundToHalf(gelu) * u;
  }
};

struct SwigluOaiGate {
  __device__ float operator()(float gate, float up) const {
    constexpr float kAlpha = 1.702f;
    constexpr float kLimit = 7.0f;
    const float g = fminf(gate, kLimit);
    const float u = fminf(fmaxf(up, -kLimit), kLimit);
    return g / (1.0f + expf(kAlpha * -g)) * (u + 1.0f);
  }
};

template <typename T, typename Gate>
__global__ void GatedKernel(const float* gate_up,  // (n_tokens, 2 * n_ff)
                            int64_t n_tokens, int64_t n_ff,
                            T* out) {  // (n_tokens, n_ff)
  const int64_t total = n_tokens * n_ff;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_ff;
    const int64_t f = i - t * n_ff;
    out[i] = FromFloat<T>(
        Gate()(gate_up[t * 2 * n_ff + f], gate_up[t * 2 * n_ff + n_ff + f]));
  }
}

template <typename Gate>
cudaError_t LaunchGated(GgmlType dtype, const float* gate_up, int64_t n_tokens,
                        int64_t n_ff, void* out, cudaStream_t stream) {
  const int64_t total = n_tokens * n_ff;
  if (total <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks =
      std::min<int64_t>((total + kThreads - 1) / kThreads, 65535);
  PACELINE_DISPATCH_DTYPE(
      dtype, T,
      LaunchKernel(GatedKernel<T, Gate>, static_cast<unsigned>(blocks),
                   kThreads, stream, gate_up, n_tokens, n_ff,
                   static_cast<T*>(out)));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSwiGlu(GgmlType dtype, const float* gate_up, int64_t n_tokens,
                         int64_t n_ff, void* out, cudaStream_t stream) {
  return LaunchGated<Silu>(dtype, gate_up, n_tokens, n_ff, out, stream);
}

cudaError_t LaunchGeluTanhGlu(GgmlType dtype, const float* gate_up,
                              int64_t n_tokens, int64_t n_ff, void* out,
                              cudaStream_t stream) {
  return LaunchGated<GeluTanhF16>(dtype, gate_up, n_tokens, n_ff, out, stream);
}

cudaError_t LaunchSwigluOai(GgmlType dtype, const float* gate_up,
                            int64_t n_tokens, int64_t n_ff, void* out,
                            cudaStream_t stream) {
  return LaunchGated<SwigluOaiGate>(dtype, gate_up, n_tokens, n_ff, out,
                                    stream);
}

}  // namespace paceline::engine::cuda
