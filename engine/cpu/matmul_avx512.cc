// AVX-512 kernels (F/BW/VL/DQ; the int8 ones also VNNI). Compiled for the
// baseline ISA with `#pragma GCC target` regions, so only these functions
// use AVX-512 and the rest of the binary runs anywhere; matmul.cc calls them
// only when EffectiveIsaLevel() allows. Everything here except the exported
// entry points has internal linkage, so no inline function compiled for
// AVX-512 can be merged with a baseline copy by the linker.
//
// The tiles are dot products over the columns (see matmul_internal.h):
// float weights are widened to f32 as they load (F16 by vcvtph2ps, BF16 by
// a shift) and multiplied into f32 accumulators; int8 weights multiply the
// activations with vpdpbusd, 64 columns (two blocks) per instruction. They
// serve decode (one token, or a few per step); from kGemmMinTokens /
// kFloatGemmMinTokens tokens on the entry points hand over to the packed
// outer-product GEMMs of matmul_avx512_gemm.cc.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/cpu/matmul_internal.h"
#include "engine/ggml_type.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics fill "don't care" operands with
// _mm512_undefined_*(), which -Wuninitialized flags once inlined (GCC bug
// 105593, fixed in 13); silence it for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace paceline::engine::cpu::internal {
namespace {

// ---- Float weights ----

// Register tile of the float kernels: 4 rows x 6 tokens = 24 accumulators
// (+ 6 activation vectors + 1 weight vector = 31 of the 32 zmm registers).
// A lone token (GEMV) uses up to 8 rows, for 8 independent FMA chains.
constexpr int kFloatRows = 4;
constexpr int kFloatTokens = 6;
constexpr int kFloatRowsOne = 8;

template <GgmlType WT>
constexpr int64_t kElemBytes = WT == GgmlType::kF32 ? 4 : 2;

// 16 weights starting at column k of `row`, as f32; `m` masks a tail.
template <GgmlType WT>
inline __m512 LoadW16(const uint8_t* row, int64_t k) {
  if constexpr (WT == GgmlType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k));
    if constexpr (WT == GgmlType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <GgmlType WT>
inline __m512 LoadW16Masked(const uint8_t* row, int64_t k, __mmask16 m) {
  if constexpr (WT == GgmlType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * k);
    if constexpr (WT == GgmlType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Sums of 4 vectors, in lanes 0, 4, 8 and 12: 13 instructions instead of
// ~4 x 9 for four horizontal reductions.
inline __m512 Reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // 128-bit chunks: [a0+a2, a1+a3, b0+b2, b1+b3], then [a, b, c, d].
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44),
                                  _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44),
                                  _mm512_shuffle_f32x4(c, d, 0xEE));
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88),
                                    _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 s2 =
      _mm512_add_ps(abcd, _mm512_permute_ps(abcd, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(s2, _mm512_permute_ps(s2, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Writes (or adds) the R x T tile sums to y[t, r]. Rows are contiguous in
// y, so groups of 4 rows reduce together and store as one 4-float vector.
template <int R, int T>
inline void StoreSums(const TileArgs& a, __m512 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float* out = a.y + t * a.y_stride;  // y[t, 0..R)
    int r = 0;
#pragma GCC unroll 2
    for (; r + 4 <= R; r += 4) {
      const __m512 sums =
          Reduce4(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t]);
      __m128 v = _mm512_castps512_ps128(
          _mm512_maskz_compress_ps(0x1111, sums));  // lanes 0, 4, 8, 12
      if (a.accumulate) v = _mm_add_ps(v, _mm_loadu_ps(out + r));
      _mm_storeu_ps(out + r, v);
    }
#pragma GCC unroll 4
    for (; r < R; ++r) {
      const float s = _mm512_reduce_add_ps(acc[r][t]);
      out[r] = a.accumulate ? out[r] + s : s;
    }
  }
}

// y[t, r] (+)= sum_{k0 <= c < k1} w[r, c] * x[t, c] for R rows x T tokens.
template <GgmlType WT, int R, int T>
void FloatTile(const TileArgs& a) {
  const float* x = static_cast<const float*>(a.x);  // (T, x_stride)
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t k = a.k0;
  for (; k + 16 <= a.k1; k += 16) {
    __m512 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_ps(x + t * a.x_stride + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Prefetch<T>(a, r, k * kElemBytes<WT>);
      const __m512 wv = LoadW16<WT>(a.w + r * a.row_bytes, k);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
  }
  if (k < a.k1) {
    const __mmask16 m = static_cast<__mmask16>((1u << (a.k1 - k)) - 1);
    __m512 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      xv[t] = _mm512_maskz_loadu_ps(m, x + t * a.x_stride + k);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wv = LoadW16Masked<WT>(a.w + r * a.row_bytes, k, m);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
  }
  StoreSums<R, T>(a, acc);
}

template <GgmlType WT, int R, int... Ts>
void FillFloatRow(TileSet& s, std::integer_sequence<int, Ts...>) {
  ((s.fn[R - 1][Ts] = &FloatTile<WT, R, Ts + 1>), ...);
}

template <GgmlType WT, int... Rs>
void FillFloat(TileSet& s, std::integer_sequence<int, Rs...>) {
  (FillFloatRow<WT, Rs + 1>(s, std::make_integer_sequence<int, kFloatTokens>{}),
   ...);
}

template <GgmlType WT, int... Rs>
void FillFloatOne(TileSet& s, std::integer_sequence<int, Rs...>) {
  ((s.fn[Rs][0] = &FloatTile<WT, Rs + 1, 1>), ...);
}

template <GgmlType WT>
TileSet MakeFloatSet() {
  TileSet s;
  s.rows = kFloatRows;
  s.rows_one = kFloatRowsOne;
  s.tokens = kFloatTokens;
  // 6 tokens x kc activations + 4 rows x kc weights stay in L1 (48 KiB);
  // 64 rows x kc weights stay in L2.
  s.kc = WT == GgmlType::kF32 ? 512 : 1024;
  s.mc = 64;
  FillFloat<WT>(s, std::make_integer_sequence<int, kFloatRows>{});
  FillFloatOne<WT>(s, std::make_integer_sequence<int, kFloatRowsOne>{});
  return s;
}

// ---- Activation quantization (identical bytes to QuantizeRowScalar) ----

void QuantizeImpl(const float* x, int64_t cols, int8_t* q, float* d) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQBlock);
    const __m512 v1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = scale;
    const __m512 iv = _mm512_set1_ps(inv);
    // cvtps rounds to nearest even (the default MXCSR mode), like lrintf.
    const __m128i q0 =
        _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)));
    const __m128i q1 =
        _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock + 16), q1);
  }
}

// sum(q) over one block of 32: vpsadbw sums |(q + 128) - 0| per 8 bytes.
inline int32_t BlockSum(const int8_t* q) {
  const __m256i u = _mm256_xor_si256(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
      _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i s4 = _mm256_sad_epu8(u, _mm256_setzero_si256());
  const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4),
                                   _mm256_extracti128_si256(s4, 1));
  const int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1);
  return static_cast<int32_t>(sum - 128 * kQBlock);
}

}  // namespace

void MatMulRowsAvx512(const MatMulTask& task, int64_t row_begin,
                      int64_t row_end) {
  if (task.n_tokens >= kFloatGemmMinTokens &&
      task.row_bytes <= kGemmMaxRowBytes) {
    GemmRowsAvx512(task, row_begin, row_end);
    return;
  }
  static const TileSet f32 = MakeFloatSet<GgmlType::kF32>();
  static const TileSet f16 = MakeFloatSet<GgmlType::kF16>();
  static const TileSet bf16 = MakeFloatSet<GgmlType::kBF16>();
  const TileSet& set = task.type == GgmlType::kF32   ? f32
                       : task.type == GgmlType::kF16 ? f16
                                                     : bf16;
  RunTiled(task, row_begin, row_end, set);
}

void QuantizeRowAvx512(const float* x, int64_t cols, int8_t* q, float* d) {
  QuantizeImpl(x, cols, q, d);
}

void BuildPairsAvx512(const int8_t* q, const float* d, int64_t cols,
                      float* d_pairs, int32_t* s_pairs) {
  const int64_t nb = cols / kQBlock;
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    float* dp = d_pairs + b * 8;  // (16) of pair b / 2
    int32_t* sp = s_pairs + b * 8;
    _mm512_storeu_ps(dp, _mm512_insertf32x8(_mm512_set1_ps(d[b]),
                                            _mm256_set1_ps(d[two ? b + 1 : b]),
                                            1));
    _mm512_storeu_si512(sp, _mm512_setzero_si512());
    sp[0] = -BlockSum(q + b * kQBlock);
    if (two) sp[8] = -BlockSum(q + (b + 1) * kQBlock);
  }
}

}  // namespace paceline::engine::cpu::internal

#pragma GCC pop_options

// ---- Int8 weights (Q8_0, Q4_0) with AVX-512 VNNI ----

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni")

namespace paceline::engine::cpu::internal {
namespace {

// 4 rows x 4 tokens: 16 accumulators + 4 activation, 4 scale and 4
// correction vectors.
constexpr int kQuantRows = 4;
constexpr int kQuantTokens = 4;
constexpr int kQuantRowsOne = 8;

// Weight blocks b and b + 1 (only b when !kTwo; the rest is then zero) as
// 64 *unsigned* bytes for vpdpbusd — Q8_0: w + 128 (w ^ 0x80); Q4_0: the
// nibble itself, w + 8 — and their scales in lanes 0-7 and 8-15. The
// activations are the signed operand; the offset times sum(q) comes off
// through s_pairs (kOffsetShift: 128 = 1 << 7, 8 = 1 << 3).
template <GgmlType WT>
constexpr int kOffsetShift = WT == GgmlType::kQ8_0 ? 7 : 3;

template <GgmlType WT, bool kTwo>
inline __m512i LoadWPair(const uint8_t* row, int64_t b, __m512* scale) {
  constexpr int64_t kBlockBytes =
      WT == GgmlType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  const uint8_t* p = row + b * kBlockBytes;
  // The two f16 scales are 16-bit words 0 and kBlockBytes / 2 from p; a
  // masked load touches only those (no read past the row), vpermw spreads
  // them over 8 lanes each.
  constexpr int kWord1 = static_cast<int>(kBlockBytes / 2);
  const __mmask32 halves = kTwo ? (1u | 1u << kWord1) : 1u;
  const __m512i h = _mm512_maskz_loadu_epi16(halves, p);
  const __m512i spread =
      kTwo ? _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                              kWord1, kWord1, kWord1, kWord1, kWord1, kWord1,
                              kWord1, kWord1, 0, 0, 0, 0, 0, 0, 0, 0)
           : _mm512_setzero_si512();
  *scale = _mm512_cvtph_ps(
      _mm512_castsi512_si256(_mm512_permutexvar_epi16(spread, h)));
  if constexpr (WT == GgmlType::kQ8_0) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i w1 =
        kTwo ? _mm256_loadu_si256(
                   reinterpret_cast<const __m256i*>(p + kBlockBytes + 2))
             : _mm256_set1_epi8(static_cast<char>(0x80));  // -> 0 after ^
    return _mm512_xor_si512(
        _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1),
        _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i x1 =
        kTwo ? _mm_loadu_si128(
                   reinterpret_cast<const __m128i*>(p + kBlockBytes + 2))
             : _mm_setzero_si128();
    const __m256i both = _mm256_set_m128i(x1, x0);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(both, mask);  // elements 0-15 of b, b+1
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(both, 4), mask);
    // [lo_b lo_b1 hi_b hi_b1] -> [lo_b hi_b lo_b1 hi_b1]: block order.
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
  }
}

// One step over blocks b (and b + 1) for R rows x T tokens. vpdpbusd sums
// 4 products of (unsigned weight) x (signed activation) per int32 lane,
// starting from -offset * sum(q) in the block's first lane, so the lanes of
// each block add up to the exact sum of w * q.
template <GgmlType WT, int R, int T, bool kTwo>
inline void QuantStep(const TileArgs& a, int64_t b, __m512 (&acc)[R][T]) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  __m512i xv[T];
  __m512 xd[T];
  __m512i xc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const int8_t* xt = x + t * a.x_stride + b * kQBlock;
    if constexpr (kTwo) {
      xv[t] = _mm512_loadu_si512(xt);
    } else {
      xv[t] = _mm512_inserti64x4(
          _mm512_setzero_si512(),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt)), 0);
    }
    const int64_t pair = t * a.pair_stride + b * 8;  // (b / 2) * 16
    xd[t] = _mm512_loadu_ps(a.xd_pairs + pair);
    xc[t] = _mm512_slli_epi32(_mm512_loadu_si512(a.xs_pairs + pair),
                              kOffsetShift<WT>);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    Prefetch<T>(a, r,
                b * (WT == GgmlType::kQ8_0 ? kQ8_0BlockBytes
                                           : kQ4_0BlockBytes));
    __m512 wd;
    const __m512i wv = LoadWPair<WT, kTwo>(a.w + r * a.row_bytes, b, &wd);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i dot = _mm512_dpbusd_epi32(xc[t], wv, xv[t]);
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                  _mm512_mul_ps(wd, xd[t]), acc[r][t]);
    }
  }
}

template <GgmlType WT, int R, int T>
void QuantTile(const TileArgs& a) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const int64_t b_end = a.k1 / kQBlock;
  int64_t b = a.k0 / kQBlock;
  for (; b + 2 <= b_end; b += 2) QuantStep<WT, R, T, true>(a, b, acc);
  if (b < b_end) QuantStep<WT, R, T, false>(a, b, acc);
  StoreSums<R, T>(a, acc);
}

template <GgmlType WT, int R, int... Ts>
void FillQuantRow(TileSet& s, std::integer_sequence<int, Ts...>) {
  ((s.fn[R - 1][Ts] = &QuantTile<WT, R, Ts + 1>), ...);
}

template <GgmlType WT, int... Rs>
void FillQuant(TileSet& s, std::integer_sequence<int, Rs...>) {
  (FillQuantRow<WT, Rs + 1>(s, std::make_integer_sequence<int, kQuantTokens>{}),
   ...);
}

template <GgmlType WT, int... Rs>
void FillQuantOne(TileSet& s, std::integer_sequence<int, Rs...>) {
  ((s.fn[Rs][0] = &QuantTile<WT, Rs + 1, 1>), ...);
}

template <GgmlType WT>
TileSet MakeQuantSet() {
  TileSet s;
  s.rows = kQuantRows;
  s.rows_one = kQuantRowsOne;
  s.tokens = kQuantTokens;
  s.kc = 2048;  // 4 tokens x 2 KiB of activations stay in L1
  s.mc = 64;
  FillQuant<WT>(s, std::make_integer_sequence<int, kQuantRows>{});
  FillQuantOne<WT>(s, std::make_integer_sequence<int, kQuantRowsOne>{});
  return s;
}

}  // namespace

void MatMulRowsAvx512Vnni(const MatMulTask& task, int64_t row_begin,
                          int64_t row_end) {
  if (task.n_tokens >= kGemmMinTokens &&
      task.row_bytes <= kGemmMaxRowBytes) {
    GemmRowsAvx512Vnni(task, row_begin, row_end);
    return;
  }
  static const TileSet q8 = MakeQuantSet<GgmlType::kQ8_0>();
  static const TileSet q4 = MakeQuantSet<GgmlType::kQ4_0>();
  RunTiled(task, row_begin, row_end,
           task.type == GgmlType::kQ8_0 ? q8 : q4);
}

}  // namespace paceline::engine::cpu::internal

#pragma GCC pop_options

#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
