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
// activations with vpdpbusd, 64 columns (two blocks) per instruction. The
// entry points hand weights packed into panels (WeightLayout::kPanels:
// what CpuEngine runs) to the outer-product GEMMs of matmul_avx512_gemm.cc
// for every token count; the tiles serve row-major weights, up to
// kFloatGemmMinTokens (float, cols a multiple of 16) and kGemmMinTokens
// (int8) tokens, from which the GEMMs pack them per call. All sum in the
// same order. Float tiles with many tokens and other cols widen F16 / BF16
// rows to f32 once per call from kConvertMinTokens.

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/gguf/ggml_type.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics fill "don't care" operands with
// _mm512_undefined_*(), which -Wuninitialized flags once inlined (GCC bug
// 105593, fixed in 13); silence it for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

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

// The tile's accumulators at the start of its column block: zero, or those
// an earlier block left in a.carry.
template <int R, int T>
inline void InitSums(const TileArgs& a, __m512 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = a.load_carry ? _mm512_loadu_ps(a.carry + r * a.carry_stride +
                                                 t * kCarryFloats)
                               : _mm512_setzero_ps();
    }
  }
}

// Saves the R x T accumulators for the next column block, or writes their
// sums to y[t, r]. Rows are contiguous in y, so groups of 4 rows reduce
// together and store as one 4-float vector; a last group of fewer rows
// reduces alongside zero vectors, so every row's sum takes the same
// additions whatever the tile shape.
template <int R, int T>
inline void StoreSums(const TileArgs& a, __m512 (&acc)[R][T]) {
  if (a.store_carry) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        _mm512_storeu_ps(a.carry + r * a.carry_stride + t * kCarryFloats,
                         acc[r][t]);
      }
    }
    return;
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float* out = a.y + t * a.y_stride;  // y[t, 0..R)
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 4) {
      const __m512 sums =
          Reduce4(acc[r][t], r + 1 < R ? acc[r + 1][t] : zero,
                  r + 2 < R ? acc[r + 2][t] : zero,
                  r + 3 < R ? acc[r + 3][t] : zero);
      const __m128 v = _mm512_castps512_ps128(
          _mm512_maskz_compress_ps(0x1111, sums));  // lanes 0, 4, 8, 12
      if (r + 4 <= R) {
        _mm_storeu_ps(out + r, v);
      } else {
        _mm_mask_storeu_ps(out + r, static_cast<__mmask8>((1u << (R - r)) - 1),
                           v);
      }
    }
  }
}

// y[t, r] (+)= sum_{k0 <= c < k1} w[r, c] * x[t, c] for R rows x T tokens.
template <GgmlType WT, int R, int T>
void FloatTile(const TileArgs& a) {
  const float* x = static_cast<const float*>(a.x);  // (T, x_stride)
  __m512 acc[R][T];
  InitSums<R, T>(a, acc);
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

// From this many tokens MatMulRowsAvx512 widens F16 / BF16 weights to f32
// once per call instead of once per token tile; rows widened at a time.
constexpr int64_t kConvertMinTokens = 2 * kFloatTokens;
constexpr int64_t kConvertRows = 64;

// rows (nr, row_bytes) of WT -> out (nr, cols) f32.
template <GgmlType WT>
void WidenRows(const uint8_t* rows, size_t row_bytes, int64_t nr,
               int64_t cols, float* out) {
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    float* o = out + r * cols;
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) _mm512_storeu_ps(o + k, LoadW16<WT>(row, k));
    if (k < cols) {
      const __mmask16 m = static_cast<__mmask16>((1u << (cols - k)) - 1);
      _mm512_mask_storeu_ps(o + k, m, LoadW16Masked<WT>(row, k, m));
    }
  }
}

// ---- Activation quantization (identical bytes to QuantizeRowScalar) ----

void QuantizeImpl(const float* x, int64_t cols, int8_t* q, float* d) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQBlock);
    const __m512 v1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float scale = _cvtsh_ss(_cvtss_sh(amax / 127.0f, 0));  // f16, RNE
    const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
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
  static const TileSet f32 = MakeFloatSet<GgmlType::kF32>();
  static const TileSet f16 = MakeFloatSet<GgmlType::kF16>();
  static const TileSet bf16 = MakeFloatSet<GgmlType::kBF16>();
  if (task.layout == WeightLayout::kPanels ||
      (task.n_tokens >= kFloatGemmMinTokens && task.cols % 16 == 0 &&
       task.row_bytes <= kGemmMaxRowBytes)) {
    FloatGemmRowsAvx512(task, row_begin, row_end);
    return;
  }
  if (task.type == GgmlType::kF32 || task.n_tokens < kConvertMinTokens) {
    RunTiled(task, row_begin, row_end,
             task.type == GgmlType::kF32   ? f32
             : task.type == GgmlType::kF16 ? f16
                                           : bf16);
    return;
  }
  // Many tokens: widen a block of rows to f32 once, then run the F32 tiles
  // over it — the same products in the same order as converting on the fly.
  thread_local std::vector<float> wide;  // (kConvertRows, cols)
  const int64_t cols = task.cols;
  if (wide.size() < static_cast<size_t>(kConvertRows * cols)) {
    wide.resize(kConvertRows * cols);
  }
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kConvertRows) {
    const int64_t nr = std::min(kConvertRows, row_end - r0);
    if (task.type == GgmlType::kF16) {
      WidenRows<GgmlType::kF16>(task.w + r0 * task.row_bytes, task.row_bytes,
                                nr, cols, wide.data());
    } else {
      WidenRows<GgmlType::kBF16>(task.w + r0 * task.row_bytes, task.row_bytes,
                                 nr, cols, wide.data());
    }
    MatMulTask block = task;
    block.type = GgmlType::kF32;
    block.w = reinterpret_cast<const uint8_t*>(wide.data());
    block.row_bytes = cols * sizeof(float);
    block.y = task.y + r0;  // y_stride stays task.rows
    RunTiled(block, 0, nr, f32);
  }
}

void QuantizeRowAvx512(const float* x, int64_t cols, int8_t* q, float* d) {
  QuantizeImpl(x, cols, q, d);
}

void BuildPairsAvx512(const int8_t* q, int64_t cols, int32_t* s_pairs) {
  const int64_t nb = cols / kQBlock;
  for (int64_t b = 0; b < nb; b += 2) {
    int32_t* sp = s_pairs + b * 8;  // (16) of pair b / 2
    _mm512_storeu_si512(sp, _mm512_setzero_si512());
    sp[0] = -BlockSum(q + b * kQBlock);
    if (b + 1 < nb) sp[8] = -BlockSum(q + (b + 1) * kQBlock);
  }
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- Int8 weights (Q8_0, Q4_0) with AVX-512 VNNI ----

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,avx512vnni")
#endif

namespace paceline::engine::cpu::internal {
namespace {

// Every (token, row) dot product takes the same float operations as in the
// packed GEMM (matmul_avx512_gemm.cc), whatever the tile or the step's
// token count: per block b in column order, acc = fma(float(isum_b),
// dw_b * dx_b, acc) from acc = 0, with isum_b the exact int32 block sum.
// A tile keeps one int32 vector per row for blocks b and b + 1 (vpdpbusd,
// 4 products per lane), folds the 8 rows' vectors into one vector of the
// 16 block sums (a transpose-and-add tree; int32 sums are exact in any
// order), and applies the scales to the 8 rows at once.
constexpr int kQuantRows = 8;
constexpr int kQuantTokens = 4;

template <GgmlType WT>
constexpr int64_t kBlockBytes =
    WT == GgmlType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;

// Weight blocks b and b + 1 (only b when !kTwo; the rest is then unused)
// of the row at `p` (block b) as 64 *unsigned* bytes for vpdpbusd — Q8_0:
// w + 128 (w ^ 0x80); Q4_0: the nibble itself, w + 8. The activations are
// the signed operand; the offset times sum(q) comes off through s_pairs
// (kOffsetShift: 128 = 1 << 7, 8 = 1 << 3).
template <GgmlType WT>
constexpr int kOffsetShift = WT == GgmlType::kQ8_0 ? 7 : 3;

template <GgmlType WT, bool kTwo>
inline __m512i LoadWPair(const uint8_t* p) {
  if constexpr (WT == GgmlType::kQ8_0) {
    __m512i v;
    if constexpr (kTwo) {
      // Bytes 0-31 from block b's qs; 32-63 re-read 2 bytes further on,
      // skipping block b + 1's scale. Nothing past block b + 1 is touched.
      v = _mm512_loadu_si512(p + 2);
      v = _mm512_mask_loadu_epi8(v, ~__mmask64{0xFFFFFFFF}, p + 4);
    } else {
      v = _mm512_maskz_loadu_epi8(__mmask64{0xFFFFFFFF}, p + 2);
    }
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i x1 =
        kTwo ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                   p + kBlockBytes<WT> + 2))
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

// Per 128 bits: [a0 + a2, b0 + b2, a1 + a3, b1 + b3].
inline __m512i Fold32(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b),
                          _mm512_unpackhi_epi32(a, b));
}

// Per 128 bits: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
inline __m512i Fold64(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b),
                          _mm512_unpackhi_epi64(a, b));
}

// Sums 8 rows' vpdpbusd vectors (lanes 0-7: block b, 8-15: block b + 1)
// into [row 0..7 of block b | row 0..7 of block b + 1].
inline __m512i FoldRows(const __m512i (&d)[8]) {
  // Per 128-bit chunk c (0, 1: block b; 2, 3: block b + 1), rows 0-3 / 4-7.
  const __m512i lo = Fold64(Fold32(d[0], d[1]), Fold32(d[2], d[3]));
  const __m512i hi = Fold64(Fold32(d[4], d[5]), Fold32(d[6], d[7]));
  // [lo.c0 + lo.c1, lo.c2 + lo.c3, hi.c0 + hi.c1, hi.c2 + hi.c3]
  const __m512i s =
      _mm512_add_epi32(_mm512_shuffle_i32x4(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_i32x4(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(3, 1, 2, 0));
}

// One step over blocks b (and b + 1) for R rows x T tokens.
template <GgmlType WT, int R, int T, bool kTwo>
inline void QuantStep(const TileArgs& a, int64_t b, __m256 (&acc)[T]) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  const uint8_t* p = a.w + b * kBlockBytes<WT>;     // row 0, block b
  __m512i wv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    Prefetch<T>(a, r, b * kBlockBytes<WT>);
    wv[r] = LoadWPair<WT, kTwo>(p + r * a.row_bytes);
  }
  // The rows' f16 scales of blocks b and b + 1: the low half of each
  // gathered dword.
  const __m512i rows = _mm512_mullo_epi64(
      _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
      _mm512_set1_epi64(static_cast<int64_t>(a.row_bytes)));
  constexpr __mmask8 kRowMask = static_cast<__mmask8>((1u << R) - 1);
  const __m256 wd0 = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(
      _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), kRowMask, rows, p, 1)));
  __m256 wd1 = _mm256_setzero_ps();
  if constexpr (kTwo) {
    wd1 = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm512_mask_i64gather_epi32(
        _mm256_setzero_si256(), kRowMask, rows, p + kBlockBytes<WT>, 1)));
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* xt = x + t * a.x_stride + b * kQBlock;
    const __m512i xv =
        kTwo ? _mm512_loadu_si512(xt)
             : _mm512_maskz_loadu_epi8(__mmask64{0xFFFFFFFF}, xt);
    const __m512i xc = _mm512_slli_epi32(
        _mm512_loadu_si512(a.xs_pairs + t * a.pair_stride + b * 8),
        kOffsetShift<WT>);
    __m512i dot[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      dot[r] = r < R ? _mm512_dpbusd_epi32(xc, wv[r < R ? r : 0], xv)
                     : _mm512_setzero_si512();
    }
    const __m512 isum = _mm512_cvtepi32_ps(FoldRows(dot));
    const float* xd = a.xd + t * a.xd_stride + b;
    acc[t] = _mm256_fmadd_ps(_mm512_castps512_ps256(isum),
                             _mm256_mul_ps(wd0, _mm256_set1_ps(xd[0])), acc[t]);
    if constexpr (kTwo) {
      acc[t] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(isum, 1),
                               _mm256_mul_ps(wd1, _mm256_set1_ps(xd[1])),
                               acc[t]);
    }
  }
}

template <GgmlType WT, int R, int T>
void QuantTile(const TileArgs& a) {
  __m256 acc[T];  // lane r: y[t, r]
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t b_end = a.k1 / kQBlock;
  int64_t b = a.k0 / kQBlock;
  for (; b + 2 <= b_end; b += 2) QuantStep<WT, R, T, true>(a, b, acc);
  if (b < b_end) QuantStep<WT, R, T, false>(a, b, acc);
  constexpr __mmask8 kRowMask = static_cast<__mmask8>((1u << R) - 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    _mm256_mask_storeu_ps(a.y + t * a.y_stride, kRowMask, acc[t]);
  }
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

template <GgmlType WT>
TileSet MakeQuantSet() {
  TileSet s;
  s.rows = kQuantRows;
  s.rows_one = kQuantRows;
  s.tokens = kQuantTokens;
  s.kc = 0;  // full rows: the tiles keep no carry (y is their accumulator)
  s.mc = 64;
  FillQuant<WT>(s, std::make_integer_sequence<int, kQuantRows>{});
  return s;
}

}  // namespace

void MatMulRowsAvx512Vnni(const MatMulTask& task, int64_t row_begin,
                          int64_t row_end) {
  if (task.layout == WeightLayout::kPanels ||
      (task.n_tokens >= kGemmMinTokens &&
       task.row_bytes <= kGemmMaxRowBytes)) {
    GemmRowsAvx512Vnni(task, row_begin, row_end);
    return;
  }
  static const TileSet q8 = MakeQuantSet<GgmlType::kQ8_0>();
  static const TileSet q4 = MakeQuantSet<GgmlType::kQ4_0>();
  RunTiled(task, row_begin, row_end,
           task.type == GgmlType::kQ8_0 ? q8 : q4);
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
