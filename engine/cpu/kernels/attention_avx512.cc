// AVX-512 (F/DQ) attention: attention_group.inc over 16-float vectors, a
// tile of 16 positions per score vector. Compiled for the baseline ISA with
// a `#pragma GCC target` region (see matmul_avx512.cc); everything but the
// entry points has internal linkage, so no AVX-512 inline function can be
// merged with a baseline copy by the linker.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "engine/cpu/kernels/attention.h"
#include "engine/cpu/kernels/attention_internal.h"
#include "engine/cpu/kv_cache.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics fill "don't care" operands with
// _mm512_undefined_*(), which -Wuninitialized flags once inlined (GCC bug
// 105593, fixed in 13); silence it for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(                                               \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
#endif

namespace paceline::engine::cpu::internal {
namespace {

constexpr int kLanes = 16;
using Vec = __m512;

inline __mmask16 FirstLanes(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1);
}

inline Vec Zero() { return _mm512_setzero_ps(); }
inline Vec Set1(float x) { return _mm512_set1_ps(x); }
inline Vec Load(const float* p) { return _mm512_loadu_ps(p); }
inline Vec LoadN(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(FirstLanes(n), p);
}
inline void Store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
inline void StoreN(float* p, Vec x, int64_t n) {
  _mm512_mask_storeu_ps(p, FirstLanes(n), x);
}
inline Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec Sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec Max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec KeepFirst(Vec x, int64_t n) {
  return _mm512_maskz_mov_ps(FirstLanes(n), x);
}

inline Vec LoadKv(const float* p) { return Load(p); }
inline Vec LoadKvN(const float* p, int64_t n) { return LoadN(p, n); }
inline Vec LoadKv(const uint16_t* p) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline Vec LoadKvN(const uint16_t* p, int64_t n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(FirstLanes(n), p));
}
// 16 elements of a Q8_0 block: int8 widened to float, times the block's
// F16 scale (exact products, rounded once).
inline Vec Q8Scale(const Q8Rows& p) {
  uint16_t d;
  std::memcpy(&d, p.block(), 2);
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(d)));
}
inline Vec LoadKv(Q8Rows p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.q()));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), Q8Scale(p));
}
inline Vec LoadKvN(Q8Rows p, int64_t n) {
  const __m128i q = _mm_maskz_loadu_epi8(FirstLanes(n), p.q());
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), Q8Scale(p));
}
inline Vec RoundToHalf(Vec x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// Halves, then quarters, ... of the vector: a fixed order.
inline float ReduceAdd(Vec x) {
  __m256 h =
      _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax(Vec x) {
  __m256 h =
      _mm256_max_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane r = the sum of a[r]'s 16 lanes: pairs of vectors are interleaved and
// added four times (within 128-bit lanes twice, then across them twice).
inline Vec SumRows(const Vec (&a)[kLanes]) {
  Vec b[8];  // per 128-bit lane: [a2i, a2i+1, a2i, a2i+1] partial sums
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  Vec c[4];  // per 128-bit lane: [a4i .. a4i+3] partial sums
  for (int i = 0; i < 4; ++i) {
    c[i] = _mm512_add_ps(
        _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
        _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  Vec d[2];  // 128-bit lanes: [c2i lanes 0+1, c2i 2+3, c2i+1 0+1, c2i+1 2+3]
  for (int i = 0; i < 2; ++i) {
    d[i] = _mm512_add_ps(
        _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
        _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  return _mm512_add_ps(
      _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
      _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2: r by a
// two-constant (Cody-Waite) reduction, exp(r) by Cephes' degree-6
// polynomial, 2^n by vscalefps (one rounding, also into subnormals).
// Clamping x to [-104, 89] keeps r exact and still gives 0 and inf; the
// clamps return x itself when it is NaN (maxps/minps return the second
// operand then).
inline Vec Exp(Vec x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const Vec n = _mm512_roundscale_ps(
      _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Vec r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  Vec y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

inline float ExpScalar(float x) { return _mm512_cvtss_f32(Exp(Set1(x))); }

#include "engine/cpu/kernels/attention_group.inc"

}  // namespace

void AttendTileAvx512(const KvCache& cache, int64_t layer, int64_t kv_head,
                      absl::Span<const int32_t> block_table,
                      const QueryTile& tile, int64_t head_dim, float scale) {
  AttendTile(cache, layer, kv_head, block_table, tile, head_dim, scale);
}

void ExpAvx512(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(y + i, Exp(Load(x + i)));
  if (i < n) StoreN(y + i, Exp(LoadN(x + i, n - i)), n - i);
}

}  // namespace paceline::engine::cpu::internal

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
#endif  // defined(__x86_64__)
