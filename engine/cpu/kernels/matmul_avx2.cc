// AVX2 + FMA + F16C kernels. Compiled for the baseline ISA with a
// `#pragma GCC target` region (see matmul_avx512.cc for why), called only
// when EffectiveIsaLevel() >= avx2; also the int8 kernels of AVX-512
// machines without VNNI.
//
// Float weights: 8 columns per FMA, f32 accumulators. Int8 weights: per
// 32-column block, vpmaddubsw multiplies |w| (unsigned) by sign(w) * q
// (signed) into int16 pairs — |w| <= 128 and |q| <= 127, so a pair stays
// below 2^15 — and vpmaddwd sums them into int32 lanes exactly.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// GCC 12's intrinsics fill "don't care" operands with _mm*_undefined_*(),
// which -Wuninitialized may flag once inlined (GCC bug 105593, fixed in
// 13); silenced for this file only, as in matmul_avx512.cc.
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

// 16 ymm registers: 4 rows x 2 tokens = 8 accumulators + 2 activation
// vectors + 1 weight vector; a lone token uses up to 8 rows.
constexpr int kFloatRows = 4;
constexpr int kFloatTokens = 2;
constexpr int kFloatRowsOne = 8;
// Int8: 2 rows x 4 tokens = 8 accumulators.
constexpr int kQuantRows = 2;
constexpr int kQuantTokens = 4;
constexpr int kQuantRowsOne = 4;

inline float HSum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v),
                               _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The tile's accumulators at the start of its column block: zero, or those
// an earlier block left in a.carry.
template <int R, int T>
inline void InitSums(const TileArgs& a, __m256 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = a.load_carry ? _mm256_loadu_ps(a.carry + r * a.carry_stride +
                                                 t * kCarryFloats)
                               : _mm256_setzero_ps();
    }
  }
}

// Saves the accumulators for the next column block, or writes y[t, r].
template <int R, int T>
inline void StoreSums(const TileArgs& a, __m256 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      if (a.store_carry) {
        _mm256_storeu_ps(a.carry + r * a.carry_stride + t * kCarryFloats,
                         acc[r][t]);
      } else {
        a.y[t * a.y_stride + r] = HSum(acc[r][t]);
      }
    }
  }
}

// ---- Float weights ----

// 8 weights from `p` (the element at column k of a row) as f32.
template <GgmlType WT>
inline __m256 LoadW8(const uint8_t* p) {
  if constexpr (WT == GgmlType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (WT == GgmlType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <GgmlType WT>
constexpr int64_t kElemBytes = WT == GgmlType::kF32 ? 4 : 2;

template <GgmlType WT, int R, int T>
void FloatTile(const TileArgs& a) {
  const float* x = static_cast<const float*>(a.x);  // (T, x_stride)
  constexpr int64_t eb = kElemBytes<WT>;
  __m256 acc[R][T];
  InitSums<R, T>(a, acc);
  int64_t k = a.k0;
  for (; k + 8 <= a.k1; k += 8) {
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * a.x_stride + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Prefetch<T>(a, r, k * eb);
      const __m256 wv = LoadW8<WT>(a.w + r * a.row_bytes + k * eb);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
  }
  if (k < a.k1) {
    // The last < 8 columns, copied into zero-padded vectors.
    const int64_t n = a.k1 - k;
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      alignas(32) float buf[8] = {};
      std::memcpy(buf, x + t * a.x_stride + k, n * sizeof(float));
      xv[t] = _mm256_load_ps(buf);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      alignas(32) uint8_t buf[32] = {};
      std::memcpy(buf, a.w + r * a.row_bytes + k * eb, n * eb);
      const __m256 wv = LoadW8<WT>(buf);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
  }
  StoreSums<R, T>(a, acc);
}

// ---- Int8 weights (Q8_0, Q4_0) ----

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Block `b` of a Q8_0 / Q4_0 row as 32 signed int8 weights; *d its scale.
template <GgmlType WT>
inline __m256i LoadWBlock(const uint8_t* row, int64_t b, float* d) {
  if constexpr (WT == GgmlType::kQ8_0) {
    const uint8_t* p = row + b * kQ8_0BlockBytes;
    *d = HalfAt(p);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
  } else {
    const uint8_t* p = row + b * kQ4_0BlockBytes;
    *d = HalfAt(p);
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i lo_mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(qs, lo_mask);                     // 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), lo_mask);  // 16..31
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
}

template <GgmlType WT, int R, int T>
void QuantTile(const TileArgs& a) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  __m256 acc[R][T];
  InitSums<R, T>(a, acc);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = a.k0 / kQBlock; b < a.k1 / kQBlock; ++b) {
    __m256i xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      xv[t] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(x + t * a.x_stride + b * kQBlock));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Prefetch<T>(a, r, b * (WT == GgmlType::kQ8_0 ? kQ8_0BlockBytes
                                                    : kQ4_0BlockBytes));
      float d;
      const __m256i wv = LoadWBlock<WT>(a.w + r * a.row_bytes, b, &d);
      const __m256i wabs = _mm256_sign_epi8(wv, wv);  // |w|; -128 -> 128 (u8)
      const __m256 wd = _mm256_set1_ps(d);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i pairs =
            _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv[t], wv));
        const __m256i dot = _mm256_madd_epi16(pairs, ones);
        const __m256 scale =
            _mm256_mul_ps(wd, _mm256_broadcast_ss(a.xd + t * a.xd_stride + b));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[r][t]);
      }
    }
  }
  StoreSums<R, T>(a, acc);
}

// ---- Tile tables ----

template <template <GgmlType, int, int> class Tile, GgmlType WT, int R,
          int... Ts>
void FillRow(TileSet& s, std::integer_sequence<int, Ts...>) {
  ((s.fn[R - 1][Ts] = &Tile<WT, R, Ts + 1>::Run), ...);
}

template <template <GgmlType, int, int> class Tile, GgmlType WT, int kTokens,
          int... Rs>
void FillRows(TileSet& s, std::integer_sequence<int, Rs...>) {
  (FillRow<Tile, WT, Rs + 1>(s, std::make_integer_sequence<int, kTokens>{}),
   ...);
}

template <template <GgmlType, int, int> class Tile, GgmlType WT, int... Rs>
void FillOne(TileSet& s, std::integer_sequence<int, Rs...>) {
  ((s.fn[Rs][0] = &Tile<WT, Rs + 1, 1>::Run), ...);
}

template <GgmlType WT, int R, int T>
struct FloatTileFn {
  static void Run(const TileArgs& a) { FloatTile<WT, R, T>(a); }
};
template <GgmlType WT, int R, int T>
struct QuantTileFn {
  static void Run(const TileArgs& a) { QuantTile<WT, R, T>(a); }
};

template <GgmlType WT>
TileSet MakeFloatSet() {
  TileSet s;
  s.rows = kFloatRows;
  s.rows_one = kFloatRowsOne;
  s.tokens = kFloatTokens;
  s.kc = 1024;
  s.mc = 64;
  FillRows<FloatTileFn, WT, kFloatTokens>(
      s, std::make_integer_sequence<int, kFloatRows>{});
  FillOne<FloatTileFn, WT>(s, std::make_integer_sequence<int, kFloatRowsOne>{});
  return s;
}

template <GgmlType WT>
TileSet MakeQuantSet() {
  TileSet s;
  s.rows = kQuantRows;
  s.rows_one = kQuantRowsOne;
  s.tokens = kQuantTokens;
  s.kc = 2048;
  s.mc = 64;
  FillRows<QuantTileFn, WT, kQuantTokens>(
      s, std::make_integer_sequence<int, kQuantRows>{});
  FillOne<QuantTileFn, WT>(s, std::make_integer_sequence<int, kQuantRowsOne>{});
  return s;
}

}  // namespace

void MatMulRowsAvx2(const MatMulTask& task, int64_t row_begin,
                    int64_t row_end) {
  static const TileSet f32 = MakeFloatSet<GgmlType::kF32>();
  static const TileSet f16 = MakeFloatSet<GgmlType::kF16>();
  static const TileSet bf16 = MakeFloatSet<GgmlType::kBF16>();
  static const TileSet q8 = MakeQuantSet<GgmlType::kQ8_0>();
  static const TileSet q4 = MakeQuantSet<GgmlType::kQ4_0>();
  const TileSet* set = &f32;
  switch (task.type) {
    case GgmlType::kF16:
      set = &f16;
      break;
    case GgmlType::kBF16:
      set = &bf16;
      break;
    case GgmlType::kQ8_0:
      set = &q8;
      break;
    case GgmlType::kQ4_0:
      set = &q4;
      break;
    default:
      break;
  }
  RunTiled(task, row_begin, row_end, *set);
}

void QuantizeRowAvx2(const float* x, int64_t cols, int8_t* q, float* d) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    __m256 v[4];
    __m256 amax8 = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * kQBlock + 8 * i);
      amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax8),
                           _mm256_extractf128_ps(amax8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float scale = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));  // f16, RNE
    const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    d[b] = scale;
    const __m256 iv = _mm256_set1_ps(inv);
    __m256i i[4];
    for (int j = 0; j < 4; ++j) {
      i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], iv));  // nearest even
    }
    // Packs interleave the 128-bit lanes; the permute restores the order.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                                         _mm256_packs_epi32(i[2], i[3]));
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), ordered);
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
