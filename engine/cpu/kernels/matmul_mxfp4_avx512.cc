// AVX-512 VNNI MXFP4 kernel (matmul_mxfp4.h), compiled in a `#pragma GCC
// target` region (see matmul_avx512.cc for why) and called only when
// EffectiveAvx512Vnni(); without VNNI the AVX2 kernel runs, as for Q4_0.
// One weight row x up to kMxfp4Tokens tokens, two blocks (64 columns) per
// step: the pair's nibbles are spread to element order in one zmm, looked
// up as level magnitudes (vpshufb), and each token's activations take the
// levels' signs (a masked negation) before vpdpbusd; lanes 0-7 sum block
// b, lanes 8-15 block b + 1.

#include <array>
#include <cstdint>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_mxfp4.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics trip -Wuninitialized (see matmul_avx512.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(                                             \
    __attribute__((target(                                                \
        "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni")
#endif

namespace paceline::engine::cpu::internal {
namespace {

// The level magnitudes |kMxfp4Levels|, for vpshufb in every 128-bit lane.
alignas(16) constexpr std::array<int8_t, 16> kMagnitudes = [] {
  std::array<int8_t, 16> m{};
  for (int i = 0; i < 16; ++i) {
    m[i] = static_cast<int8_t>(kMxfp4Levels[i] < 0 ? -kMxfp4Levels[i]
                                                   : kMxfp4Levels[i]);
  }
  return m;
}();

inline __m512i MagnitudeTable() {
  return _mm512_broadcast_i32x4(
      _mm_load_si128(reinterpret_cast<const __m128i*>(kMagnitudes.data())));
}

// Blocks b and b + 1 (only b when !kTwo) at `blk`: their 64 nibbles in
// element order, [lo_b hi_b lo_b1 hi_b1], one per byte. The 16-byte qs
// arrive by broadcast loads ([q0 q0 q1 q1]), which keeps the shuffle port
// free for the level lookup; the odd 128-bit lanes then shift down to their
// high nibbles.
template <bool kTwo>
inline __m512i Nibbles(const uint8_t* blk) {
  __m512i spread = _mm512_broadcast_i32x4(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 1)));
  if constexpr (kTwo) {
    spread = _mm512_mask_broadcast_i32x4(
        spread, 0xFF00,
        _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(blk + kMxfp4BlockBytes + 1)));
  }
  const __m512i shifts = _mm512_broadcast_i64x4(
      _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
  const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(spread, shifts),
                                       _mm512_set1_epi8(0x0F));
  // Without block b + 1, its lanes hold nibble 0 (level 0).
  return kTwo ? nib : _mm512_maskz_mov_epi32(0x00FF, nib);
}

// [a x 8, b x 8] (b: 0 when !kTwo) by broadcast loads.
template <bool kTwo>
inline __m512 PairOf(const float* a, const float* b) {
  const __m512 v = _mm512_set1_ps(*a);
  if constexpr (!kTwo) return _mm512_maskz_mov_ps(0x00FF, v);
  return _mm512_mask_broadcastss_ps(v, 0xFF00, _mm_load_ss(b));
}

// Blocks b and b + 1 (kTwo) for T tokens into acc[t]:
//   q: token 0's int8 activations from block b, tokens q_stride apart
//   xd: token 0's scale of block b, tokens xd_stride apart
template <int T, bool kTwo>
inline void PairStep(const uint8_t* blk, const int8_t* q, int64_t q_stride,
                     const float* xd, int64_t xd_stride, __m512 (&acc)[T]) {
  const __m512i nib = Nibbles<kTwo>(blk);
  const __m512i aw = _mm512_shuffle_epi8(MagnitudeTable(), nib);
  const __mmask64 negative = _mm512_test_epi8_mask(nib, _mm512_set1_epi8(8));
  // [dw_b x 8, dw_b1 x 8]
  const __m512 dw = PairOf<kTwo>(&kE8M0Half[blk[0]],
                                 &kE8M0Half[blk[kTwo ? kMxfp4BlockBytes : 0]]);
  constexpr __mmask64 kLoad = kTwo ? ~__mmask64{0} : __mmask64{0xFFFFFFFF};
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m512i x = _mm512_maskz_loadu_epi8(kLoad, q + t * q_stride);
    // x = q_t (never -128) negated where the level is negative.
    const __m512i xs =
        _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
    const __m512 isum =
        _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, xs));
    const float* d = xd + t * xd_stride;
    const __m512 scale = _mm512_mul_ps(dw, PairOf<kTwo>(d, d + 1));
    acc[t] = _mm512_fmadd_ps(isum, scale, acc[t]);
  }
}

// y[t0 .. t0 + T, r].
template <int T>
void RowTokens(const MatMulTask& task, int64_t r, int64_t t0) {
  const int64_t cols = task.cols;
  const int64_t nb = cols / kQBlock;
  const uint8_t* w_row = task.w + r * task.row_bytes;  // (nb blocks)
  const int8_t* q = task.qx.q + t0 * cols;             // (T, cols)
  const float* xd = task.qx.d + t0 * nb;               // (T, nb)
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* blk = w_row + b * kMxfp4BlockBytes;
    __builtin_prefetch(blk + kPrefetchBytes, 0, 3);
    PairStep<T, true>(blk, q + b * kQBlock, cols, xd + b, nb, acc);
  }
  if (b < nb) {
    PairStep<T, false>(w_row + b * kMxfp4BlockBytes, q + b * kQBlock, cols,
                       xd + b, nb, acc);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    task.y[(t0 + t) * task.rows + r] = _mm512_reduce_add_ps(acc[t]);
  }
}

struct RowTile {
  template <int T>
  static void Run(const MatMulTask& task, int64_t r, int64_t t0) {
    RowTokens<T>(task, r, t0);
  }
};

}  // namespace

void MatMulRowsMxfp4Avx512Vnni(const MatMulTask& task, int64_t row_begin,
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
