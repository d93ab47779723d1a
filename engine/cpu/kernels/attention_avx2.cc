// AVX2 + FMA attention: attention_group.inc over 8-float vectors, a tile of
// 8 positions per score vector. Compiled for the baseline ISA with a
// `#pragma GCC target` region (see matmul_avx512.cc); everything but the
// entry points has internal linkage.

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

constexpr int kLanes = 8;
using Vec = __m256;

// All ones in lanes [0, n).
inline __m256i FirstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline Vec Zero() { return _mm256_setzero_ps(); }
inline Vec Set1(float x) { return _mm256_set1_ps(x); }
inline Vec Load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec LoadN(const float* p, int64_t n) {
  return _mm256_maskload_ps(p, FirstLanes(n));
}
inline void Store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
inline void StoreN(float* p, Vec x, int64_t n) {
  _mm256_maskstore_ps(p, FirstLanes(n), x);
}
inline Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec KeepFirst(Vec x, int64_t n) {
  return _mm256_and_ps(x, _mm256_castsi256_ps(FirstLanes(n)));
}

inline Vec LoadKv(const float* p) { return Load(p); }
inline Vec LoadKvN(const float* p, int64_t n) { return LoadN(p, n); }
inline Vec LoadKv(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline Vec LoadKvN(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t h[kLanes] = {};
  std::memcpy(h, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
// 8 elements of a Q8_0 block: int8 widened to float, times the block's
// F16 scale (exact products, rounded once).
inline Vec Q8Scale(const Q8Rows& p) {
  uint16_t d;
  std::memcpy(&d, p.block(), 2);
  return _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(d)));
}
inline Vec LoadKv(Q8Rows p) {
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p.q()));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), Q8Scale(p));
}
inline Vec LoadKvN(Q8Rows p, int64_t n) {
  alignas(16) int8_t q[16] = {};
  std::memcpy(q, p.q(), static_cast<size_t>(n));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_load_si128(
                           reinterpret_cast<const __m128i*>(q)))),
                       Q8Scale(p));
}
inline Vec RoundToHalf(Vec x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// Halves, then quarters, ... of the vector: a fixed order.
inline float ReduceAdd(Vec x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax(Vec x) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane r = the sum of a[r]'s 8 lanes: pairs of vectors are interleaved and
// added three times (within 128-bit lanes twice, then across them).
inline Vec SumRows(const Vec (&a)[kLanes]) {
  Vec b[4];  // per 128-bit lane: [a2i, a2i+1, a2i, a2i+1] partial sums
  for (int i = 0; i < 4; ++i) {
    b[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  Vec c[2];  // per 128-bit lane: [a4i .. a4i+3] partial sums
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm256_add_ps(
        _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
        _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20),
                       _mm256_permute2f128_ps(c[0], c[1], 0x31));
}

// exp(x) as in attention_avx512.cc, but 2^n as two powers of two built
// from exponent bits, 2^(n/2) and 2^(n - n/2): both are normal over the
// whole clamped range, the first product is exact and the second rounds
// once (into subnormals or to inf as the true result does).
inline Vec Exp(Vec x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const Vec n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Vec r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  Vec y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const Vec s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const Vec s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

inline float ExpScalar(float x) { return _mm256_cvtss_f32(Exp(Set1(x))); }

#include "engine/cpu/kernels/attention_group.inc"

}  // namespace

void AttendTileAvx2(const KvCache& cache, int64_t layer, int64_t kv_head,
                    absl::Span<const int32_t> block_table,
                    const QueryTile& tile, int64_t head_dim, float scale) {
  AttendTile(cache, layer, kv_head, block_table, tile, head_dim, scale);
}

void ExpAvx2(const float* x, int64_t n, float* y) {
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
#endif  // defined(__x86_64__)
