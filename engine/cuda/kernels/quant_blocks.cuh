#ifndef PACELINE_ENGINE_CUDA_KERNELS_QUANT_BLOCKS_CUH_
#define PACELINE_ENGINE_CUDA_KERNELS_QUANT_BLOCKS_CUH_

// Device decoding of GGML's block formats, 32 elements ("a chunk") at a
// time: chunk c of a row is elements [32c, 32c + 32). A 32-element type's
// chunk is one block; a K-quant super-block (256 elements) holds 8 chunks.
// The layouts and the arithmetic are those of engine/gguf/ggml_type.cc's
// dequantizers, operation by operation: products are __fmul_rn so nvcc
// never contracts `dl * q - ml` into an FMA, and the values equal
// DequantizeRow's bit for bit. Included by .cu files only.

#include <cuda_fp16.h>

#include <cstdint>

#include "engine/cuda/kernels/quantized_matmul.h"

namespace paceline::engine::cuda {

// A quantized type's block, from ggml_type_layout.h.
template <GgmlType kQ>
struct QuantTraits {
  static_assert(IsDeviceBlockType(kQ));
  static constexpr int kElems = static_cast<int>(GgmlBlockElems(kQ));
  static constexpr int kBytes = static_cast<int>(GgmlBlockBytes(kQ));
};

__device__ __forceinline__ float LoadHalfAt(const uint8_t* p) {
  return __half2float(
      __ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// MXFP4: the doubled E2M1 level of nibble q (kMxfp4Levels: magnitudes 0,
// 1, 2, 3, 4, 6, 8, 12 packed a byte each; bit 3 the sign).
__device__ __forceinline__ float Mxfp4Level(int q) {
  const int m =
      static_cast<int>((0x0C08060403020100ull >> (8 * (q & 7))) & 0xFF);
  return static_cast<float>((q & 8) != 0 ? -m : m);
}

// MXFP4's block scale 2^(e - 128), as E8M0HalfToFloat: a normal float from
// e = 2, the subnormals 2^-128 and 2^-127 below.
__device__ __forceinline__ float E8M0HalfAt(uint8_t e) {
  const unsigned bits =
      e >= 2 ? static_cast<unsigned>(e - 1) << 23 : 1u << (21 + e);
  return __int_as_float(static_cast<int>(bits));
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml_type.cc's
// K4ScaleMin).
__device__ __forceinline__ void K4ScaleMinAt(const uint8_t* s, int j,
                                             int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// Q3_K: the 6-bit scale of 16-element group g (ggml_type.cc's Q3KScale).
__device__ __forceinline__ int Q3KScaleAt(const uint8_t* s, int g) {
  const int low = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return low | high << 4;
}

// Writes chunk `c` of `row` to w and returns the factor its values still
// need: w[l] * returned is element 32c + l. The 32-element types return
// their block scale (so a dot product multiplies once per block); the
// K-quants return 1 with the values complete.
template <GgmlType kQ>
__device__ __forceinline__ float LoadChunk(const uint8_t* row, int64_t c,
                                           float (&w)[32]) {
  constexpr int kChunks = QuantTraits<kQ>::kElems / 32;
  const uint8_t* b = row + (c / kChunks) * QuantTraits<kQ>::kBytes;
  const int j = static_cast<int>(c % kChunks);  // chunk within the block
  const int h = j / 4, k = j % 4;  // K-quants: half and quarter of a half
  if constexpr (kQ == GgmlType::kQ8_0) {
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      w[l] = static_cast<float>(static_cast<int8_t>(b[2 + l]));
    }
    return LoadHalfAt(b);
  } else if constexpr (kQ == GgmlType::kQ4_0) {
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      w[l] = static_cast<float>((b[2 + l] & 0x0f) - 8);
      w[l + 16] = static_cast<float>((b[2 + l] >> 4) - 8);
    }
    return LoadHalfAt(b);
  } else if constexpr (kQ == GgmlType::kMXFP4) {
    // e | qs[16]: low nibbles elements 0..15, high nibbles 16..31.
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      w[l] = Mxfp4Level(b[1 + l] & 0x0f);
      w[l + 16] = Mxfp4Level(b[1 + l] >> 4);
    }
    return E8M0HalfAt(b[0]);
  } else if constexpr (kQ == GgmlType::kQ2_K) {
    // scales[16] | qs[64] | d | dmin; 2 bits at 2k of qs[32h + l].
    const float d = LoadHalfAt(b + 80), dmin = LoadHalfAt(b + 82);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const uint8_t s = b[2 * j + g];
      const float dl = __fmul_rn(d, static_cast<float>(s & 0xF));
      const float ml = __fmul_rn(dmin, static_cast<float>(s >> 4));
#pragma unroll
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        const int q = (b[16 + 32 * h + l] >> (2 * k)) & 3;
        w[l] = __fmul_rn(dl, static_cast<float>(q)) - ml;
      }
    }
  } else if constexpr (kQ == GgmlType::kQ3_K) {
    // hmask[32] | qs[64] | scales[12] | d; a clear hmask bit subtracts 4.
    const float d = LoadHalfAt(b + 108);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const float dl =
          __fmul_rn(d, static_cast<float>(Q3KScaleAt(b + 96, 2 * j + g) - 32));
#pragma unroll
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        const int low = (b[32 + 32 * h + l] >> (2 * k)) & 3;
        const int q = low - (((b[l] >> j) & 1) ? 0 : 4);
        w[l] = __fmul_rn(dl, static_cast<float>(q));
      }
    }
  } else if constexpr (kQ == GgmlType::kQ4_K || kQ == GgmlType::kQ5_K) {
    // d | dmin | scales[12] | (Q5_K: qh[32]) | qs[128].
    constexpr int kQs = kQ == GgmlType::kQ5_K ? 48 : 16;
    int scale, min;
    K4ScaleMinAt(b + 4, j, &scale, &min);
    const float dl = __fmul_rn(LoadHalfAt(b), static_cast<float>(scale));
    const float ml = __fmul_rn(LoadHalfAt(b + 2), static_cast<float>(min));
    const uint8_t* qs = b + kQs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      int q = (qs[l] >> shift) & 0xF;
      if constexpr (kQ == GgmlType::kQ5_K) q |= ((b[16 + l] >> j) & 1) << 4;
      w[l] = __fmul_rn(dl, static_cast<float>(q)) - ml;
    }
  } else {
    static_assert(kQ == GgmlType::kQ6_K);
    // ql[128] | qh[64] | int8 scales[16] | d.
    const float d = LoadHalfAt(b + 208);
    const uint8_t* lo = b + 64 * h + 32 * (k % 2);
    const uint8_t* hi = b + 128 + 32 * h;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const float dl = __fmul_rn(
          d, static_cast<float>(static_cast<int8_t>(b[192 + 2 * j + g])));
#pragma unroll
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        const int q =
            ((lo[l] >> (4 * (k / 2))) & 0xF) | ((hi[l] >> (2 * k)) & 3) << 4;
        w[l] = __fmul_rn(dl, static_cast<float>(q - 32));
      }
    }
  }
  return 1.0f;
}

}  // namespace paceline::engine::cuda

#endif  // PACELINE_ENGINE_CUDA_KERNELS_QUANT_BLOCKS_CUH_
