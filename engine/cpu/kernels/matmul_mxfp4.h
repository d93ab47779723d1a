#ifndef PACELINE_ENGINE_CPU_KERNELS_MATMUL_MXFP4_H_
#define PACELINE_ENGINE_CPU_KERNELS_MATMUL_MXFP4_H_

// MXFP4 weights (gpt-oss's experts) as the matmul kernels read them:
// internal to engine/cpu/kernels, one file per ISA level
// (matmul_mxfp4_*.cc). The weights stay in their 17-byte blocks, row-major
// (no panel layout): e (E8M0) | qs[16], element j < 16 the low nibble of
// qs[j], j + 16 the high one (ggml_type.cc).
//
// Activations are quantized as for Q8_0 (matmul_internal.h's
// QuantizedActs: int8 q and a float scale dx per block of 32). MXFP4's
// doubled E2M1 levels (kMxfp4Levels, -12..12) are int8 too, so block b of
// a (token, row) dot product is
//   isum_b = sum_j kMxfp4Levels[nibble_j] * q_j      (exact int32)
//   y += float(isum_b) * (E8M0HalfToFloat(e_b) * dx_b)
// The SIMD levels look the levels up with vpshufb (their magnitudes; the
// sign moves onto the activation) and sum with vpmaddubsw (AVX2) or
// vpdpbusd (AVX-512 VNNI); they accumulate the float products in vector
// lanes (AVX2: blocks b and b + 1 in two accumulators; AVX-512: one, block
// b in lanes 0-7, b + 1 in 8-15), so levels differ from the scalar order
// by float rounding.
// Within a level, y[t, r] takes the same operations whatever n_tokens, the
// other tokens or the thread split (batch invariance).

#include <array>
#include <bit>
#include <cstdint>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu::internal {

// e | qs[16]
inline constexpr int64_t kMxfp4BlockBytes = GgmlBlockBytes(GgmlType::kMXFP4);
static_assert(GgmlBlockElems(GgmlType::kMXFP4) == kQBlock);

// Tokens that share one decoding of a weight block (the SIMD levels).
inline constexpr int kMxfp4Tokens = 4;

// E8M0HalfToFloat(e), 2^(e - 128), for every byte: a 1 KiB table the
// kernels index (subnormal 2^-128 and 2^-127 below e = 2).
inline constexpr std::array<float, 256> kE8M0Half = [] {
  std::array<float, 256> t{};
  for (uint32_t e = 0; e < 256; ++e) {
    t[e] =
        std::bit_cast<float>(e >= 2 ? (e - 1) << 23 : uint32_t{1} << (21 + e));
  }
  return t;
}();

// The SIMD levels' driver: every row of [row_begin, row_end) in token
// tiles of kMxfp4Tokens, then one tile of the 1-3 tokens left, each by
// Tile::Run<T>(task, row, first_token).
template <typename Tile>
void ForMxfp4TokenTiles(const MatMulTask& task, int64_t row_begin,
                        int64_t row_end) {
  static_assert(kMxfp4Tokens == 4, "the tails below are 3, 2 and 1 tokens");
  for (int64_t r = row_begin; r < row_end; ++r) {
    int64_t t0 = 0;
    for (; t0 + kMxfp4Tokens <= task.n_tokens; t0 += kMxfp4Tokens) {
      Tile::template Run<kMxfp4Tokens>(task, r, t0);
    }
    switch (task.n_tokens - t0) {
      case 3:
        Tile::template Run<3>(task, r, t0);
        break;
      case 2:
        Tile::template Run<2>(task, r, t0);
        break;
      case 1:
        Tile::template Run<1>(task, r, t0);
        break;
      default:
        break;
    }
  }
}

// Rows [row_begin, row_end) of an MXFP4 task (task.qx from a QuantizeRow*).
void MatMulRowsMxfp4Scalar(const MatMulTask& task, int64_t row_begin,
                           int64_t row_end);
#if defined(__x86_64__)
// AVX2 + FMA: vpshufb levels, vpsignb, vpmaddubsw + vpmaddwd.
void MatMulRowsMxfp4Avx2(const MatMulTask& task, int64_t row_begin,
                         int64_t row_end);
// AVX-512 BW + VNNI: two blocks per 512-bit step, vpdpbusd. Without VNNI
// the AVX2 kernel runs (as for Q8_0 / Q4_0).
void MatMulRowsMxfp4Avx512Vnni(const MatMulTask& task, int64_t row_begin,
                               int64_t row_end);
#endif

}  // namespace paceline::engine::cpu::internal

#endif  // PACELINE_ENGINE_CPU_KERNELS_MATMUL_MXFP4_H_
