// AVX-512 BW + VNNI K-quant kernels (matmul_kquant.h): as the AVX2 ones
// with 64-element chunks, vpmaddubsw into int16 pairs and vpdpwssd by the
// groups' scales straight into int32 lanes (two instructions per 64
// weights and token), and up to 8 tokens per tile.

#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_kquant.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// GCC 12 bug 105593 (see matmul_avx512.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

namespace paceline::engine::cpu::internal {
namespace {

#include "engine/cpu/kernels/matmul_kquant_scales.inc"

constexpr int kRows = 1;
constexpr int kRowsOne = 2;
constexpr int kTokens = 8;

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 32 bytes at p in both halves.
inline __m512i Twice(const uint8_t* p) {
  return _mm512_broadcast_i64x4(Load32(p));
}

// Bytes `lo` in the low 32 lanes, `hi` in the high 32.
inline __m512i Halves(int lo, int hi) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(lo))),
      _mm256_set1_epi8(static_cast<char>(hi)), 1);
}

// Int16 shift counts: `lo` for the low 16 lanes, `hi` for the high 16.
inline __m512i Shifts(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)),
                            _mm256_set1_epi16(hi), 1);
}

// Elements 64c .. 64c + 63 of the super-block at b as unsigned bytes u.
template <GgmlType WT>
inline __m512i LoadChunk(const uint8_t* b, int c) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m3 = _mm512_set1_epi8(3);
  const int h = c / 2, p = c % 2;
  if constexpr (WT == GgmlType::kQ2_K || WT == GgmlType::kQ3_K) {
    const __m512i low = _mm512_and_si512(
        _mm512_srlv_epi16(Twice(b + (WT == GgmlType::kQ2_K ? 16 : 32) + 32 * h),
                          Shifts(4 * p, 4 * p + 2)),
        m3);
    if constexpr (WT == GgmlType::kQ2_K) return low;
    const __mmask64 hb =
        _mm512_test_epi8_mask(Twice(b), Halves(1 << (2 * c), 1 << (2 * c + 1)));
    return _mm512_mask_add_epi8(low, hb, low, _mm512_set1_epi8(4));
  } else if constexpr (WT == GgmlType::kQ4_K || WT == GgmlType::kQ5_K) {
    const __m256i q = Load32(b + (WT == GgmlType::kQ4_K ? 16 : 48) + 32 * c);
    const __m512i lo =
        _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q),
                                            _mm256_srli_epi16(q, 4), 1),
                         m4);
    if constexpr (WT == GgmlType::kQ4_K) return lo;
    const __mmask64 hb = _mm512_test_epi8_mask(
        Twice(b + 16), Halves(1 << (2 * c), 1 << (2 * c + 1)));
    return _mm512_mask_add_epi8(lo, hb, lo, _mm512_set1_epi8(16));
  } else {  // Q6_K
    const __m512i ql = _mm512_loadu_si512(b + 64 * h);
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(ql, 4 * p), m4);
    const __m512i hi = _mm512_and_si512(
        _mm512_srlv_epi16(Twice(b + 128 + 32 * h), Shifts(4 * p, 4 * p + 2)),
        m3);
    return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
  }
}

// The int16 multipliers of chunk c: lanes 8j .. 8j + 7 group 4c + j.
inline __m512i ChunkScales(__m512i sc16, int c) {
  const __m512i idx = _mm512_add_epi16(
      _mm512_set1_epi16(static_cast<int16_t>(4 * c)),
      _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                         21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                         11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                        3));
  return _mm512_permutexvar_epi16(idx, sc16);
}

template <GgmlType WT, int R, int T>
void KTile(const TileArgs& a) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  constexpr int64_t bb = KBlockBytes(WT);
  float acc[R][T] = {};
  for (int64_t sb = a.k0 / kKBlock; sb < a.k1 / kKBlock; ++sb) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* b = a.w + r * a.row_bytes + sb * bb;
      Prefetch<T>(a, r, sb * bb);
      __m256i sc16, mn16;
      float d, dmin;
      LoadKScales<WT>(b, &sc16, &mn16, &d, &dmin);
      const __m512i sc = _mm512_castsi256_si512(sc16);
      __m512i isum[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i u = LoadChunk<WT>(b, c);
        const __m512i s = ChunkScales(sc, c);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m512i q =
              _mm512_loadu_si512(x + t * a.x_stride + sb * kKBlock + 64 * c);
          isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(u, q), s);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i bs = Load32(reinterpret_cast<const uint8_t*>(
            a.xs16 + t * a.xs16_stride + sb * 16));
        const __m256i a8 =
            _mm256_add_epi32(_mm512_castsi512_si256(isum[t]),
                             _mm512_extracti64x4_epi64(isum[t], 1));
        acc[r][t] =
            ApplySuperBlock<WT>(a8, _mm256_madd_epi16(bs, mn16), d, dmin,
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

void MatMulRowsKQuantAvx512(const MatMulTask& task, int64_t row_begin,
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

#pragma GCC pop_options

#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
