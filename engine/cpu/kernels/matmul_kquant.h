#ifndef PACELINE_ENGINE_CPU_KERNELS_MATMUL_KQUANT_H_
#define PACELINE_ENGINE_CPU_KERNELS_MATMUL_KQUANT_H_

// The K-quant weight types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) as the matmul
// kernels read them: internal to engine/cpu/kernels, shared by the scalar,
// AVX2 and AVX-512 paths (matmul_kquant_*.cc).
//
// Weights stay in their 256-element super-blocks (layouts: the dequantizers
// in engine/gguf/ggml_type.cc); with AVX-512 VNNI, Q4_K and Q6_K are
// repacked at load into panels of 16 rows whose super-blocks keep the same
// bytes (matmul_internal.h), read by their own kernels. Every kernel reads a super-block as 256
// unsigned integers u (element order) and 16 groups of 16 elements, each
// with an integer scale sc[g] and an integer "min" mn[g] that multiplies the
// group's activation sum:
//   Q4_K, Q5_K  w = d * sc_j * u - dmin * m_j  (32-element sub-block j:
//               sc[g] = sc_{g/2}, mn[g] = m_{g/2}; u in 0..15 / 0..31)
//   Q2_K        w = d * sc_g * u - dmin * m_g  (u in 0..3)
//   Q3_K        w = d * (s_g - 32) * (u - 4)   (u in 0..7; mn = -4 sc)
//   Q6_K        w = d * s_g * (u - 32)         (u in 0..63; mn = -32 sc)
// Activations are quantized per token as Q8_K (QuantizeRowQ8K): per
// super-block an int8 q, a float scale dx and the 16 group sums bs[g] of q.
// A super-block then contributes, with exact int32 sums,
//   A = sum_g sc[g] * dot_g(u, q) (+ sum_g mn[g] * bs[g] for Q3_K / Q6_K)
//   B = sum_g mn[g] * bs[g]                      (Q2_K, Q4_K, Q5_K only)
//   acc = fma(float(A), d * dx, acc); acc = fma(float(B), -dmin * dx, acc)
// per super-block in column order from acc = 0. Every ISA level and tile
// shape takes exactly these float operations per (token, row), so K-quant
// results are bit for bit the same across levels and batches.

#include <cstdint>
#include <cstring>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu::internal {

// Elements per super-block (every K-quant's).
inline constexpr int64_t kKBlock = GgmlBlockElems(GgmlType::kQ4_K);
inline constexpr int64_t kKGroup = 16;  // elements per activation sum

// Whether B (the dmin term) exists for `type`.
inline constexpr bool KHasMin(GgmlType type) {
  return type == GgmlType::kQ2_K || type == GgmlType::kQ4_K ||
         type == GgmlType::kQ5_K;
}

// One super-block's scales as the kernels use them (see above).
struct KScales {
  int16_t sc[16];
  int16_t mn[16];
  float d;     // the super-block scale
  float dmin;  // Q2_K, Q4_K, Q5_K: the min scale, negated (-dmin); else 0
};

inline float KHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

// The 6-bit scale and min of sub-block j of Q4_K / Q5_K's 12 bytes.
inline void K4ScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// Scales of the super-block at `b` (GgmlBlockBytes(type) bytes); portable.
void DecodeKScales(GgmlType type, const uint8_t* b, KScales* s);

// The 256 unsigned weights u of the super-block at `b`; portable.
void DecodeKWeights(GgmlType type, const uint8_t* b, uint8_t* u);

// Quantizes one token as llama.cpp's quantize_row_q8_K does: per
// super-block, with m the element of largest magnitude (the first one),
// iscale = -127 / m, q = min(127, round-half-even(iscale * x)), dx =
// 1 / iscale, bs[g] the sums of q over 16 elements; all zero when m is 0.
//   x (cols), q (cols), d (cols / 256), bsums (cols / 16); cols % 256 == 0.
void QuantizeRowQ8K(const float* x, int64_t cols, int8_t* q, float* d,
                    int16_t* bsums);

// Rows [row_begin, row_end) of a K-quant task (task.qx from QuantizeRowQ8K).
void MatMulRowsKQuantScalar(const MatMulTask& task, int64_t row_begin,
                            int64_t row_end);
#if defined(__x86_64__)
// AVX2 + FMA: vpmaddubsw (u x q in int16 pairs) and vpmaddwd by the scales.
void MatMulRowsKQuantAvx2(const MatMulTask& task, int64_t row_begin,
                          int64_t row_end);
// AVX-512 BW + VNNI: vpmaddubsw and vpdpwssd, 64 columns per instruction.
void MatMulRowsKQuantAvx512(const MatMulTask& task, int64_t row_begin,
                            int64_t row_end);
// QuantizeRowQ8K with AVX-512 F / BW, 16 elements (one group) a vector:
// the same bytes, scales and sums for finite x.
void QuantizeRowQ8KAvx512(const float* x, int64_t cols, int8_t* q, float* d,
                          int16_t* bsums);
#endif

}  // namespace paceline::engine::cpu::internal

#endif  // PACELINE_ENGINE_CPU_KERNELS_MATMUL_KQUANT_H_
