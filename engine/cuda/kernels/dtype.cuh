#ifndef PACELINE_ENGINE_CUDA_KERNELS_DTYPE_CUH_
#define PACELINE_ENGINE_CUDA_KERNELS_DTYPE_CUH_

// Device-side helpers shared by the kernels: float conversions of the
// GgmlType element types, warp/block reductions, and a dispatch macro
// from GgmlType to a C++ type. Included by .cu files only.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename A>
__device__ __forceinline__ A WarpSum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the total. `scratch` holds 32 values; the call syncs.
template <typename A>
__device__ __forceinline__ A BlockSum(A v, A* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n_warps = blockDim.x / 32;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A total = 0;
  for (int w = 0; w < n_warps; ++w) total += scratch[w];
  return total;
}

}  // namespace paceline::engine::cuda

// Runs the statements with `T` bound to the C++ type of `dtype`; returns
// cudaErrorInvalidValue from the enclosing launcher for any other type.
#define PACELINE_DISPATCH_DTYPE(dtype, T, ...)  \
  switch (dtype) {                              \
    case ::paceline::engine::GgmlType::kF32: {  \
      using T = float;                          \
      __VA_ARGS__;                              \
    } break;                                    \
    case ::paceline::engine::GgmlType::kF16: {  \
      using T = __half;                         \
      __VA_ARGS__;                              \
    } break;                                    \
    case ::paceline::engine::GgmlType::kBF16: { \
      using T = __nv_bfloat16;                  \
      __VA_ARGS__;                              \
    } break;                                    \
    default:                                    \
      return cudaErrorInvalidValue;             \
  }

#endif  // PACELINE_ENGINE_CUDA_KERNELS_DTYPE_CUH_
