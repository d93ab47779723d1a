// AVX2 MXFP4 kernel (matmul_mxfp4.h), compiled in a `#pragma GCC target`
// region (see matmul_avx512.cc for why) and called only when
// EffectiveIsaLevel() allows AVX2. One weight row x up to kMxfp4Tokens
// tokens at a time: each block is decoded once (vpshufb of the nibbles into
// the signed levels) and multiplied into every token of the tile.

#include <algorithm>
#include <cstdint>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_mxfp4.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace paceline::engine::cpu::internal {
namespace {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Block `blk`'s 32 levels in element order, as int8.
inline __m256i DecodeLevels(const uint8_t* blk) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Levels)));
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 1));
  const __m256i nib = _mm256_and_si256(
      _mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(table, nib);
}

// One block for T tokens into acc[t][k]:
//   q: token 0's 32 int8 activations of the block, tokens q_stride apart
//   xd: token 0's block scale, tokens xd_stride apart
template <int T>
inline void BlockStep(const uint8_t* blk, const int8_t* q, int64_t q_stride,
                      const float* xd, int64_t xd_stride, __m256 (&acc)[T][2],
                      int k) {
  const __m256i w = DecodeLevels(blk);
  const __m256i aw = _mm256_abs_epi8(w);
  const float dw = kE8M0Half[blk[0]];
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i x =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + t * q_stride));
    // |w| * (x with w's sign): products fit int16 pairs (2 * 12 * 127).
    const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
    const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
    acc[t][k] = _mm256_fmadd_ps(isum, _mm256_set1_ps(dw * xd[t * xd_stride]),
                                acc[t][k]);
  }
}

// y[t0 .. t0 + T, r]: blocks alternate between two accumulators per token.
template <int T>
void RowTokens(const MatMulTask& task, int64_t r, int64_t t0) {
  const int64_t cols = task.cols;
  const int64_t nb = cols / kQBlock;
  const uint8_t* w_row = task.w + r * task.row_bytes;  // (nb blocks)
  const int8_t* q = task.qx.q + t0 * cols;             // (T, cols)
  const float* xd = task.qx.d + t0 * nb;               // (T, nb)
  __m256 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* blk = w_row + b * kMxfp4BlockBytes;
    __builtin_prefetch(blk + kPrefetchBytes, 0, 3);
    BlockStep<T>(blk, q + b * kQBlock, cols, xd + b, nb, acc, 0);
    BlockStep<T>(blk + kMxfp4BlockBytes, q + (b + 1) * kQBlock, cols,
                 xd + b + 1, nb, acc, 1);
  }
  if (b < nb) {
    BlockStep<T>(w_row + b * kMxfp4BlockBytes, q + b * kQBlock, cols, xd + b,
                 nb, acc, 0);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    task.y[(t0 + t) * task.rows + r] =
        HSum(_mm256_add_ps(acc[t][0], acc[t][1]));
  }
}

struct RowTile {
  template <int T>
  static void Run(const MatMulTask& task, int64_t r, int64_t t0) {
    RowTokens<T>(task, r, t0);
  }
};

}  // namespace

void MatMulRowsMxfp4Avx2(const MatMulTask& task, int64_t row_begin,
                         int64_t row_end) {
  ForMxfp4TokenTiles<RowTile>(task, row_begin, row_end);
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
