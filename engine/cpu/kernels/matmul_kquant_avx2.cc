// AVX2 + FMA K-quant kernels (matmul_kquant.h). A tile is R rows x T
// tokens: per row and super-block the scales are decoded once, then each
// 32-element chunk of weights once, as unsigned bytes, and multiplied into
// every token of the tile: vpmaddubsw (u <= 63, |q| <= 127: pairs stay
// below 2^15) then vpmaddwd by the groups' scales into int32 lanes.

#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_kquant.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// GCC 12 bug 105593 (see matmul_avx2.cc).
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

#include "engine/cpu/kernels/matmul_kquant_scales.inc"

constexpr int kRows = 1;
constexpr int kRowsOne = 2;
constexpr int kTokens = 4;

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Elements 32i .. 32i + 31 of the super-block at b as unsigned bytes u.
template <GgmlType WT>
inline __m256i LoadChunk(const uint8_t* b, int i) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m1 = _mm256_set1_epi8(1);
  const int h = i / 4, k = i % 4;
  if constexpr (WT == GgmlType::kQ2_K) {
    return _mm256_and_si256(_mm256_srli_epi16(Load32(b + 16 + 32 * h), 2 * k),
                            m3);
  } else if constexpr (WT == GgmlType::kQ3_K) {
    const __m256i low =
        _mm256_and_si256(_mm256_srli_epi16(Load32(b + 32 + 32 * h), 2 * k), m3);
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(Load32(b), i), m1);
    return _mm256_or_si256(low, _mm256_slli_epi16(hb, 2));
  } else if constexpr (WT == GgmlType::kQ4_K) {
    return _mm256_and_si256(
        _mm256_srli_epi16(Load32(b + 16 + 32 * (i / 2)), 4 * (i % 2)), m4);
  } else if constexpr (WT == GgmlType::kQ5_K) {
    const __m256i lo = _mm256_and_si256(
        _mm256_srli_epi16(Load32(b + 48 + 32 * (i / 2)), 4 * (i % 2)), m4);
    const __m256i hb =
        _mm256_and_si256(_mm256_srli_epi16(Load32(b + 16), i), m1);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
  } else {  // Q6_K
    const __m256i lo = _mm256_and_si256(
        _mm256_srli_epi16(Load32(b + 64 * h + 32 * (k % 2)), 4 * (k / 2)), m4);
    const __m256i hi = _mm256_and_si256(
        _mm256_srli_epi16(Load32(b + 128 + 32 * h), 2 * k), m3);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
}

// The int16 multipliers of chunk i: lanes 0-7 group 2i, 8-15 group 2i + 1.
inline __m256i ChunkScales(__m256i sc16, int i) {
  const __m256i pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(i));
  const __m256i ctrl =
      _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                       3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(pair, ctrl);
}

template <GgmlType WT, int R, int T>
void KTile(const TileArgs& a) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  constexpr int64_t bb = GgmlBlockBytes(WT);
  float acc[R][T] = {};
  for (int64_t sb = a.k0 / kKBlock; sb < a.k1 / kKBlock; ++sb) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* b = a.w + r * a.row_bytes + sb * bb;
      Prefetch<T>(a, r, sb * bb);
      __m256i sc16, mn16;
      float d, dmin;
      LoadKScales<WT>(b, &sc16, &mn16, &d, &dmin);
      __m256i isum[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i u = LoadChunk<WT>(b, i);
        const __m256i s = ChunkScales(sc16, i);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
              x + t * a.x_stride + sb * kKBlock + 32 * i));
          isum[t] = _mm256_add_epi32(
              isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), s));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
            a.xs16 + t * a.xs16_stride + sb * 16));
        acc[r][t] =
            ApplySuperBlock<WT>(isum[t], _mm256_madd_epi16(bs, mn16), d, dmin,
                                a.xd[t * a.xd_stride + sb], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) a.y[t * a.y_stride + r] = acc[r][t];
  }
}

template <GgmlType WT, int R, int... Ts>
void FillRow(TileSet& s, std::integer_sequence<int, Ts...>) {
  ((s.fn[R - 1][Ts] = &KTile<WT, R, Ts + 1>), ...);
}

template <GgmlType WT>
TileSet MakeSet() {
  TileSet s;
  s.rows = kRows;
  s.rows_one = kRowsOne;
  s.tokens = kTokens;
  s.kc = 0;  // full rows: the tiles keep their sums in floats, no carry
  s.mc = 64;
  FillRow<WT, 1>(s, std::make_integer_sequence<int, kTokens>{});
  s.fn[1][0] = &KTile<WT, 2, 1>;
  return s;
}

}  // namespace

void MatMulRowsKQuantAvx2(const MatMulTask& task, int64_t row_begin,
                          int64_t row_end) {
  static const TileSet q2 = MakeSet<GgmlType::kQ2_K>();
  static const TileSet q3 = MakeSet<GgmlType::kQ3_K>();
  static const TileSet q4 = MakeSet<GgmlType::kQ4_K>();
  static const TileSet q5 = MakeSet<GgmlType::kQ5_K>();
  static const TileSet q6 = MakeSet<GgmlType::kQ6_K>();
  switch (task.type) {
    case GgmlType::kQ2_K:
      return RunTiled(task, row_begin, row_end, q2);
    case GgmlType::kQ3_K:
      return RunTiled(task, row_begin, row_end, q3);
    case GgmlType::kQ4_K:
      return RunTiled(task, row_begin, row_end, q4);
    case GgmlType::kQ5_K:
      return RunTiled(task, row_begin, row_end, q5);
    default:
      return RunTiled(task, row_begin, row_end, q6);
  }
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
