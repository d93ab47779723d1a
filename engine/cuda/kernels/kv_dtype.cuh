#ifndef PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_CUH_
#define PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_CUH_

// Device-side access to the KV cache's rows, of the CUDA engine's KV types
// (GgmlTypes chosen apart from the model's device dtype:
// CudaEngineOptions::kv_dtype). A row is one head's head_dim elements of K
// or V at one position (cpu/kv_cache.h's layout and encodings, so both
// engines hold the same bytes for the same floats):
//
//   F32, F16, BF16  head_dim elements of the type (F16 and BF16 rounded to
//                   nearest-even when written).
//   Q8_0            head_dim / 32 blocks of ggml's block_q8_0, 34 bytes
//                   each: an F16 scale d = max|x| / 127, then 32 int8
//                   q = round(x / d); x reads back as d * q. head_dim must
//                   be a multiple of 32.
//
// Here: a C++ type per KV type (the element type, or the tag KvQ8_0), the
// bytes of a row, loading one element as float, storing a row, and a
// dispatch macro. Included by .cu files only.

#include <cstdint>
#include <type_traits>

#include "engine/cuda/kernels/dtype.cuh"
#include "engine/cuda/kernels/quant_blocks.cuh"
#include "engine/gguf/ggml_type_layout.h"

namespace paceline::engine::cuda {

// Rows of Q8_0 blocks (no element type of their own).
struct KvQ8_0 {};

template <typename K>
__host__ __device__ __forceinline__ int64_t KvRowBytesOf(int64_t head_dim) {
  if constexpr (std::is_same_v<K, KvQ8_0>) {
    return GgmlRowBytesOf(GgmlType::kQ8_0, head_dim);
  } else {
    return head_dim * static_cast<int64_t>(sizeof(K));
  }
}

// Element i of a row, as float.
template <typename K>
__device__ __forceinline__ float LoadKv(const uint8_t* row, int64_t i) {
  return ToFloat(reinterpret_cast<const K*>(row)[i]);
}
// Q8_0: d * q rounded once to float, as the CPU engine dequantizes
// (DequantizeRow); never fused into a following add.
template <>
__device__ __forceinline__ float LoadKv<KvQ8_0>(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / GgmlBlockElems(GgmlType::kQ8_0)) *
                               GgmlBlockBytes(GgmlType::kQ8_0);
  const int8_t q =
      static_cast<int8_t>(b[2 + i % GgmlBlockElems(GgmlType::kQ8_0)]);
  return __fmul_rn(LoadHalfAt(b), static_cast<float>(q));
}

// Writes the head_dim floats of `v` as one row, the block's threads
// together (thread i takes elements i, i + blockDim.x, ...). Every thread
// of the block must call it.
template <typename K>
__device__ __forceinline__ void StoreKvRow(const float* v, int64_t head_dim,
                                           uint8_t* row) {
  K* out = reinterpret_cast<K*>(row);
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    out[i] = FromFloat<K>(v[i]);
  }
}
// Q8_0, bit for bit as engine/gguf's QuantizeRow (the CPU engine's KV
// write): d = amax / 127 and q = round(x * (1 / d)) in float, half away
// from zero, with d itself stored as F16 (nearest-even). With blockDim.x
// and head_dim multiples of 32, each warp's 32 elements are exactly one
// block, so the block's amax is a warp max.
template <>
__device__ __forceinline__ void StoreKvRow<KvQ8_0>(const float* v,
                                                   int64_t head_dim,
                                                   uint8_t* row) {
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    const float x = v[i];
    const float amax = WarpMax(fabsf(x));
    const float d = __fdiv_rn(amax, 127.0f);
    const float inv = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    uint8_t* b = row + (i / GgmlBlockElems(GgmlType::kQ8_0)) *
                           GgmlBlockBytes(GgmlType::kQ8_0);
    const int lane = static_cast<int>(i % GgmlBlockElems(GgmlType::kQ8_0));
    // Blocks start at even offsets of a cudaMalloc'ed pool: aligned.
    if (lane == 0) *reinterpret_cast<__half*>(b) = __float2half_rn(d);
    b[2 + lane] =
        static_cast<uint8_t>(static_cast<int8_t>(roundf(__fmul_rn(x, inv))));
  }
}

}  // namespace paceline::engine::cuda

// Runs the statements with `K` bound to the C++ type of GgmlType `kv`.
#define PACELINE_DISPATCH_KV(kv, K, ...)          \
  switch (kv) {                                   \
    case ::paceline::engine::GgmlType::kF32: {    \
      using K = float;                            \
      __VA_ARGS__;                                \
    } break;                                      \
    case ::paceline::engine::GgmlType::kF16: {    \
      using K = __half;                           \
      __VA_ARGS__;                                \
    } break;                                      \
    case ::paceline::engine::GgmlType::kBF16: {   \
      using K = __nv_bfloat16;                    \
      __VA_ARGS__;                                \
    } break;                                      \
    case ::paceline::engine::GgmlType::kQ8_0: {   \
      using K = ::paceline::engine::cuda::KvQ8_0; \
      __VA_ARGS__;                                \
    } break;                                      \
    default:                                      \
      return cudaErrorInvalidValue;               \
  }

#endif  // PACELINE_ENGINE_CUDA_KERNELS_KV_DTYPE_CUH_
