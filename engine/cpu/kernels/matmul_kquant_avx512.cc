// AVX-512 BW + VNNI K-quant kernels (matmul_kquant.h).
//
// Row-major weights: 64-element chunks of weights decoded once per row and
// super-block, vpmaddubsw into int16 pairs and vpdpwssd by the groups'
// scales straight into int32 lanes (two instructions per 64 weights and
// token); tiles of 8 rows x 1 token or 4 rows x 4 tokens, whose
// per-super-block sums fold into one vector of the rows, so the scaling and
// float accumulation run once for all of them.
//
// Q4_K / Q6_K panels (matmul_internal.h, what CpuEngine runs): 16 rows to a
// vector, one int32 lane per row, so nothing is folded across lanes. Per
// 16 rows and 4 columns one vpdpbusd of the weights (after an and, or a
// shift and an or for Q6_K's high bits) with 4 broadcast activations; the
// 16 rows' 6-bit scales unpack with a few whole-vector ands and shifts per
// super-block; each group's int32 sums are scaled by vpmulld. Tokens run
// one after another over a panel, which stays in cache between them.

#include <algorithm>
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

#if defined(__clang__)  // clang has no GCC target regions
#pragma clang attribute push(                                             \
    __attribute__((target(                                                \
        "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif

namespace paceline::engine::cpu::internal {
namespace {

#include "engine/cpu/kernels/matmul_kquant_scales.inc"

// A lone token (GEMV) takes 8 rows (one float lane each) at a time; a batch
// 4 rows x 4 tokens, 16 int32 accumulators either way.
constexpr int kRows = 8;
constexpr int kBatchRows = 4;
constexpr int kTokens = 4;

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

// Per 128-bit chunk: the partial lane sums [a, b, c, d].
inline __m512i Fold4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b),
                                      _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d),
                                      _mm512_unpackhi_epi32(c, d));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd),
                          _mm512_unpackhi_epi64(ab, cd));
}

// The lane sums of v[0..R) (int32) into lanes 0..R of one vector.
template <int R>
inline __m256i FoldRows(const __m512i (&v)[kRows]) {
  __m512i z[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r)
    z[r] = r < R ? v[r < R ? r : 0] : _mm512_setzero_si512();
  // Per 128-bit chunk: [z0, z1, z2, z3] partial sums, then the 4 chunks.
  const __m512i lo = Fold4(z[0], z[1], z[2], z[3]);
  const __m512i hi = Fold4(z[4], z[5], z[6], z[7]);
  const __m512i u =
      _mm512_add_epi32(_mm512_shuffle_i32x4(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_i32x4(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
  // u's chunks: [lo.c0 + c1, lo.c2 + c3, hi.c0 + c1, hi.c2 + c3]
  const __m256i a = _mm512_castsi512_si256(u);
  const __m256i b = _mm512_extracti64x4_epi64(u, 1);
  return _mm256_set_m128i(
      _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)),
      _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)));
}

// R rows x T tokens: per super-block each row's scales and chunks decoded
// once, then its int32 sums folded 8 rows to a vector and applied as
// acc[r] = fma(float(A_r), d_r * dx, acc[r]) (and the min term), lane r.
template <GgmlType WT, int R, int T>
void KTile(const TileArgs& a) {
  const int8_t* x = static_cast<const int8_t*>(a.x);  // (T, x_stride)
  constexpr int64_t bb = GgmlBlockBytes(WT);
  __m256 acc[T];  // lane r: y[t, r]
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = a.k0 / kKBlock; sb < a.k1 / kKBlock; ++sb) {
    __m256i sc16[R], mn16[R];
    alignas(32) float d[8] = {}, dmin[8] = {};
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Prefetch<T>(a, r, sb * bb);
      LoadKScales<WT>(a.w + r * a.row_bytes + sb * bb, &sc16[r], &mn16[r],
                      &d[r], &dmin[r]);
    }
    __m512i isum[T][kRows];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) isum[t][r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m512i q[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        q[t] = _mm512_loadu_si512(x + t * a.x_stride + sb * kKBlock + 64 * c);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i u = LoadChunk<WT>(a.w + r * a.row_bytes + sb * bb, c);
        const __m512i s = ChunkScales(_mm512_castsi256_si512(sc16[r]), c);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          isum[t][r] =
              _mm512_dpwssd_epi32(isum[t][r], _mm512_maddubs_epi16(u, q[t]), s);
        }
      }
    }
    const __m256 d8 = _mm256_load_ps(d);
    const __m256 dmin8 = _mm256_load_ps(dmin);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i bs = Load32(reinterpret_cast<const uint8_t*>(
          a.xs16 + t * a.xs16_stride + sb * 16));
      __m512i m[kRows];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        m[r] = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, mn16[r]));
      }
      __m256i a8 = FoldRows<R>(isum[t]);
      const __m256i m8 = FoldRows<R>(m);
      const __m256 dx = _mm256_set1_ps(a.xd[t * a.xd_stride + sb]);
      if constexpr (!KHasMin(WT)) a8 = _mm256_add_epi32(a8, m8);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a8), _mm256_mul_ps(d8, dx),
                               acc[t]);
      if constexpr (KHasMin(WT)) {
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m8),
                                 _mm256_mul_ps(dmin8, dx), acc[t]);
      }
    }
  }
  constexpr __mmask8 kRowMask = static_cast<__mmask8>((1u << R) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm256_mask_storeu_ps(a.y + t * a.y_stride, kRowMask, acc[t]);
  }
}

// ---- Panels: 16 rows per vector ----

constexpr int kLanes = 16;  // rows per panel (kPanelRows)

// 4 activations (int8) at p in every int32 lane.
inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Two int16 values in every int32 lane: lo in the low half.
inline __m512i BcastPair(int lo, int hi) {
  return _mm512_set1_epi32(static_cast<int32_t>(
      static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
      static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// Byte j of every int32 lane, zero- or sign-extended.
inline __m512i LaneByteU(__m512i v, int j) {
  return j == 3 ? _mm512_srli_epi32(v, 24)
                : _mm512_and_si512(_mm512_srli_epi32(v, 8 * j),
                                   _mm512_set1_epi32(0xFF));
}
inline __m512i LaneByteS(__m512i v, int j) {
  return j == 3 ? _mm512_srai_epi32(v, 24)
                : _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * j), 24);
}

// The f16 in the low (high) half of every int32 lane, as float.
inline __m512 LaneHalfLo(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}
inline __m512 LaneHalfHi(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
}

inline __m512i Bytes(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }

// A vector of a panel, fetching the line kKPanelPrefetch bytes further
// into L1: a panel is one sequential stream, which the hardware
// prefetchers alone follow too slowly (they stop at every 4 KiB page).
// Measured one thread, 4096 x 4096: Q4_K 0.65 -> 0.88 of the read
// bandwidth with two panels at once, Q6_K 0.62 -> 0.74 (noisy, shared VM).
constexpr int64_t kKPanelPrefetch = 2048;
inline __m512i LoadStream(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p) + kKPanelPrefetch, _MM_HINT_T0);
  return _mm512_loadu_si512(p);
}

// The 16 rows' 6-bit scales and mins of the Q4_K panel super-block at p
// (quad 0: d | dmin; quads 1-3: the 12 scale bytes, K4ScaleMin per lane):
// sc[0] bytes sc_0 .. sc_3, sc[1] sc_4 .. sc_7 of each lane; mn likewise.
inline void Q4KScales(const uint8_t* p, __m512i (&sc)[2], __m512i (&mn)[2]) {
  const __m512i m6 = Bytes(0x3F), lo4 = Bytes(0x0F), hi2 = Bytes(0x03);
  const __m512i u0 = LoadStream(p + 64), u1 = LoadStream(p + 128);
  const __m512i u2 = LoadStream(p + 192);
  sc[0] = _mm512_and_si512(u0, m6);
  sc[1] = _mm512_or_si512(
      _mm512_and_si512(u2, lo4),
      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), hi2), 4));
  mn[0] = _mm512_and_si512(u1, m6);
  mn[1] = _mm512_or_si512(
      _mm512_and_si512(_mm512_srli_epi32(u2, 4), lo4),
      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), hi2), 4));
}

// One Q4_K super-block of NP panels (p[i], KPanelBlockBytes bytes each)
// against one token's q (256), bsums (16) and dx into acc[i] (lane r: row
// r of panel i): A = sum_j sc_j dot_j, B = sum_j m_j (bs[2j] + bs[2j + 1]).
// Several panels are several memory streams (faster than one) and share
// each broadcast activation.
template <int NP>
inline void Q4KPanelBlock(const uint8_t* const (&p)[NP], const int8_t* q,
                          const int16_t* bs, float dx, __m512 (&acc)[NP]) {
  const __m512i lo4 = Bytes(0x0F);
  __m512i sc[NP][2], mn[NP][2], a[NP];
#pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) {
    Q4KScales(p[i], sc[i], mn[i]);
    a[i] = _mm512_setzero_si512();
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles), 2c + 1
    __m512i even[NP], odd16[NP];
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
      even[i] = odd16[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i qe = Bcast4(q + 64 * c + 4 * k);
      const __m512i qo = Bcast4(q + 64 * c + 32 + 4 * k);
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) {
        const __m512i v = LoadStream(p[i] + 64 * (4 + 8 * c + k));
        even[i] = _mm512_dpbusd_epi32(even[i], _mm512_and_si512(v, lo4), qe);
        // High nibbles left in place: 16 x their dot product, exactly.
        odd16[i] =
            _mm512_dpbusd_epi32(odd16[i], _mm512_andnot_si512(lo4, v), qo);
      }
    }
    const int j = 2 * c;
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
      a[i] = _mm512_add_epi32(
          a[i], _mm512_mullo_epi32(even[i], LaneByteU(sc[i][j / 4], j % 4)));
      a[i] = _mm512_add_epi32(
          a[i], _mm512_mullo_epi32(_mm512_srai_epi32(odd16[i], 4),
                                   LaneByteU(sc[i][j / 4], j % 4 + 1)));
    }
  }
  // B by vpdpwssd: int16 pairs (m_j, m_j+2) of each lane's bytes times the
  // pairs of group sums.
  int bsub[8];
  for (int j = 0; j < 8; ++j) bsub[j] = bs[2 * j] + bs[2 * j + 1];
  const __m512i low16 = _mm512_set1_epi32(0x00FF00FF);
  const __m512 vdx = _mm512_set1_ps(dx);
#pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) {
    __m512i b = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int* s = bsub + 4 * h;
      b = _mm512_dpwssd_epi32(b, _mm512_and_si512(mn[i][h], low16),
                              BcastPair(s[0], s[2]));
      b = _mm512_dpwssd_epi32(
          b, _mm512_and_si512(_mm512_srli_epi32(mn[i][h], 8), low16),
          BcastPair(s[1], s[3]));
    }
    const __m512i dd = LoadStream(p[i]);
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[i]),
                             _mm512_mul_ps(LaneHalfLo(dd), vdx), acc[i]);
    const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), LaneHalfHi(dd));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b),
                             _mm512_mul_ps(neg_dmin, vdx), acc[i]);
  }
}

// One Q4_K super-block of one panel against T tokens (q[t], bs[t], dx[t])
// into acc[t]: Q4KPanelBlock's integer sums and float operations for each
// token, with each weight vector loaded, split into nibbles and its scales
// decoded once for all T tokens (a batch's step re-read them per token).
template <int T>
inline void Q4KPanelBlockTokens(const uint8_t* p, const int8_t* const (&q)[T],
                                const int16_t* const (&bs)[T],
                                const float (&dx)[T], __m512 (&acc)[T]) {
  const __m512i lo4 = Bytes(0x0F);
  __m512i sc[2], mn[2];
  Q4KScales(p, sc, mn);
  __m512i a[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) a[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles), 2c + 1
    __m512i even[T], odd16[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) even[t] = odd16[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i v = LoadStream(p + 64 * (4 + 8 * c + k));
      const __m512i v_lo = _mm512_and_si512(v, lo4);
      const __m512i v_hi = _mm512_andnot_si512(lo4, v);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        even[t] =
            _mm512_dpbusd_epi32(even[t], v_lo, Bcast4(q[t] + 64 * c + 4 * k));
        odd16[t] = _mm512_dpbusd_epi32(odd16[t], v_hi,
                                       Bcast4(q[t] + 64 * c + 32 + 4 * k));
      }
    }
    const int j = 2 * c;
    const __m512i s_even = LaneByteU(sc[j / 4], j % 4);
    const __m512i s_odd = LaneByteU(sc[j / 4], j % 4 + 1);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(even[t], s_even));
      a[t] = _mm512_add_epi32(
          a[t], _mm512_mullo_epi32(_mm512_srai_epi32(odd16[t], 4), s_odd));
    }
  }
  const __m512i low16 = _mm512_set1_epi32(0x00FF00FF);
  const __m512i mn_lo[2] = {_mm512_and_si512(mn[0], low16),
                            _mm512_and_si512(mn[1], low16)};
  const __m512i mn_hi[2] = {
      _mm512_and_si512(_mm512_srli_epi32(mn[0], 8), low16),
      _mm512_and_si512(_mm512_srli_epi32(mn[1], 8), low16)};
  const __m512i dd = LoadStream(p);
  const __m512 d = LaneHalfLo(dd);
  const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), LaneHalfHi(dd));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    int bsub[8];
    for (int j = 0; j < 8; ++j) bsub[j] = bs[t][2 * j] + bs[t][2 * j + 1];
    __m512i b = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int* s = bsub + 4 * h;
      b = _mm512_dpwssd_epi32(b, mn_lo[h], BcastPair(s[0], s[2]));
      b = _mm512_dpwssd_epi32(b, mn_hi[h], BcastPair(s[1], s[3]));
    }
    const __m512 vdx = _mm512_set1_ps(dx[t]);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[t]), _mm512_mul_ps(d, vdx),
                             acc[t]);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b),
                             _mm512_mul_ps(neg_dmin, vdx), acc[t]);
  }
}

// Columns 4 l4 .. 4 l4 + 3 of half h of a Q6_K panel super-block at p,
// as 6-bit values u[k] (element 128h + 32k + l: its low 4 bits in ql byte
// 64h + 32(k % 2) + l, nibble k / 2, its high 2 in qh byte 32h + l, bits
// 2k).
inline void Q6KUnpack(const uint8_t* p, int h, int l4, __m512i (&u)[4]) {
  const __m512i lo4 = Bytes(0x0F), hi2 = Bytes(0x30);
  const uint8_t* ql = p + 64 * (16 * h + l4);
  const __m512i v0 = LoadStream(ql), v1 = LoadStream(ql + 512);
  const __m512i vh = LoadStream(p + 64 * (32 + 8 * h + l4));
  u[0] = _mm512_or_si512(_mm512_and_si512(v0, lo4),
                         _mm512_and_si512(_mm512_slli_epi32(vh, 4), hi2));
  u[1] = _mm512_or_si512(_mm512_and_si512(v1, lo4),
                         _mm512_and_si512(_mm512_slli_epi32(vh, 2), hi2));
  u[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v0, 4), lo4),
                         _mm512_and_si512(vh, hi2));
  u[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v1, 4), lo4),
                         _mm512_and_si512(_mm512_srli_epi32(vh, 2), hi2));
}

// One Q6_K super-block of NP panels, as Q4KPanelBlock: element 128h + 32k
// + l has its low 4 bits in ql byte 64h + 32(k % 2) + l (nibble k / 2) and
// its high 2 in qh byte 32h + l (bits 2k), group 8h + 2k + l / 16;
// A = sum_g sc_g (dot_g - 32 bs_g).
template <int NP>
inline void Q6KPanelBlock(const uint8_t* const (&p)[NP], const int8_t* q,
                          const int16_t* bs, float dx, __m512 (&acc)[NP]) {
  __m512i a[NP];
#pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) a[i] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512i dot[NP][8];  // groups 8h + g, from -32 bs
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i init = _mm512_set1_epi32(-32 * bs[8 * h + g]);
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) dot[i][g] = init;
    }
#pragma GCC unroll 8
    for (int l4 = 0; l4 < 8; ++l4) {  // columns l = 4 * l4 .. + 3
      __m512i x[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) x[k] = Bcast4(q + 128 * h + 32 * k + 4 * l4);
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) {
        __m512i u[4];
        Q6KUnpack(p[i], h, l4, u);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int g = 2 * k + l4 / 4;
          dot[i][g] = _mm512_dpbusd_epi32(dot[i][g], u[k], x[k]);
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {  // scale quad 2h + s: groups 8h + 4s + j
        const __m512i sc = LoadStream(p[i] + 64 * (48 + 2 * h + s));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          a[i] = _mm512_add_epi32(
              a[i], _mm512_mullo_epi32(dot[i][4 * s + j], LaneByteS(sc, j)));
        }
      }
    }
  }
  const __m512 vdx = _mm512_set1_ps(dx);
#pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) {
    const uint8_t* d16 = p[i] + 64 * KPanelQuads(GgmlType::kQ6_K);
    _mm_prefetch(reinterpret_cast<const char*>(d16) + kKPanelPrefetch,
                 _MM_HINT_T0);
    const __m512 d = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d16)));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[i]), _mm512_mul_ps(d, vdx),
                             acc[i]);
  }
}

// One Q6_K super-block of one panel against T tokens, as
// Q4KPanelBlockTokens: each token's integer sums and float operations are
// Q6KPanelBlock's, the weights loaded and unpacked to 6-bit values once
// for all T (the activations are broadcast from memory per token).
template <int T>
inline void Q6KPanelBlockTokens(const uint8_t* p, const int8_t* const (&q)[T],
                                const int16_t* const (&bs)[T],
                                const float (&dx)[T], __m512 (&acc)[T]) {
  __m512i a[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) a[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512i dot[T][8];  // groups 8h + g, from -32 bs
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        dot[t][g] = _mm512_set1_epi32(-32 * bs[t][8 * h + g]);
      }
    }
#pragma GCC unroll 8
    for (int l4 = 0; l4 < 8; ++l4) {  // columns l = 4 * l4 .. + 3
      __m512i u[4];
      Q6KUnpack(p, h, l4, u);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int g = 2 * k + l4 / 4;
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          dot[t][g] = _mm512_dpbusd_epi32(
              dot[t][g], u[k], Bcast4(q[t] + 128 * h + 32 * k + 4 * l4));
        }
      }
    }
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {  // scale quad 2h + s: groups 8h + 4s + j
      const __m512i sc = LoadStream(p + 64 * (48 + 2 * h + s));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i scale = LaneByteS(sc, j);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          a[t] = _mm512_add_epi32(a[t],
                                  _mm512_mullo_epi32(dot[t][4 * s + j], scale));
        }
      }
    }
  }
  const uint8_t* d16 = p + 64 * KPanelQuads(GgmlType::kQ6_K);
  _mm_prefetch(reinterpret_cast<const char*>(d16) + kKPanelPrefetch,
               _MM_HINT_T0);
  const __m512 d = _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d16)));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[t]),
                             _mm512_mul_ps(d, _mm512_set1_ps(dx[t])), acc[t]);
  }
}

// NP panels from `panel` (panel_bytes apart) against every token: token
// after token, super-block after super-block into one accumulator of each
// panel's 16 rows; y (row 0 of the first panel) gets `n` rows.
template <GgmlType WT, int NP>
void KPanels(const MatMulTask& task, const uint8_t* panel, int64_t panel_bytes,
             float* y, int64_t n) {
  const int64_t nb = task.cols / kKBlock;
  for (int64_t t = 0; t < task.n_tokens; ++t) {
    const int8_t* q = task.qx.q + t * task.cols;
    const int16_t* bs = task.qx.bsums + t * nb * kKGroup;
    const float* xd = task.qx.d + t * nb;
    __m512 acc[NP];
    const uint8_t* p[NP];
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nb; ++sb) {
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) {
        p[i] = panel + i * panel_bytes + sb * KPanelBlockBytes(WT);
      }
      if constexpr (WT == GgmlType::kQ4_K) {
        Q4KPanelBlock<NP>(p, q + sb * kKBlock, bs + sb * kKGroup, xd[sb], acc);
      } else {
        Q6KPanelBlock<NP>(p, q + sb * kKBlock, bs + sb * kKGroup, xd[sb], acc);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
      const int64_t left = std::clamp<int64_t>(n - kLanes * i, 0, kLanes);
      _mm512_mask_storeu_ps(y + t * task.rows + kLanes * i,
                            static_cast<__mmask16>((1u << left) - 1), acc[i]);
    }
  }
}

// One Q4_K / Q6_K panel (16 rows from `panel`; y gets `n` of them)
// against tokens t0 .. t0 + T - 1, super-block after super-block
// (Q4KPanelBlockTokens, Q6KPanelBlockTokens).
template <GgmlType WT, int T>
void KPanelTokens(const MatMulTask& task, const uint8_t* panel, float* y,
                  int64_t n, int64_t t0) {
  const int64_t nb = task.cols / kKBlock;
  __m512 acc[T];
  const int8_t* q[T];
  const int16_t* bs[T];
  float dx[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nb; ++sb) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      q[t] = task.qx.q + (t0 + t) * task.cols + sb * kKBlock;
      bs[t] = task.qx.bsums + ((t0 + t) * nb + sb) * kKGroup;
      dx[t] = task.qx.d[(t0 + t) * nb + sb];
    }
    const uint8_t* block = panel + sb * KPanelBlockBytes(WT);
    if constexpr (WT == GgmlType::kQ4_K) {
      Q4KPanelBlockTokens<T>(block, q, bs, dx, acc);
    } else {
      Q6KPanelBlockTokens<T>(block, q, bs, dx, acc);
    }
  }
  const auto mask = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    _mm512_mask_storeu_ps(y + (t0 + t) * task.rows, mask, acc[t]);
  }
}

// Tokens per KPanelTokens call in a batch: their accumulators (Q6_K's 8
// group sums each) stay in registers beside the panel's vectors.
template <GgmlType WT>
inline constexpr int kKTokensAtOnce = WT == GgmlType::kQ4_K ? 4 : 2;

// A batch's Q4_K / Q6_K panels, a panel at a time (it stays in L1 across
// its tokens), kKTokensAtOnce tokens per pass over it.
template <GgmlType WT>
void KPanelRowsBatch(const MatMulTask& task, int64_t row_begin,
                     int64_t row_end) {
  constexpr int kT = kKTokensAtOnce<WT>;
  const int64_t panel_bytes = PanelBytes(WT, task.cols);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kLanes) {
    const uint8_t* panel = task.w + r0 / kLanes * panel_bytes;
    const int64_t n = std::min<int64_t>(kLanes, row_end - r0);
    float* y = task.y + r0;
    int64_t t0 = 0;
    for (; t0 + kT <= task.n_tokens; t0 += kT) {
      KPanelTokens<WT, kT>(task, panel, y, n, t0);
    }
    switch (task.n_tokens - t0) {  // fewer than kT left
      case 3:
        KPanelTokens<WT, 3>(task, panel, y, n, t0);
        break;
      case 2:
        KPanelTokens<WT, 2>(task, panel, y, n, t0);
        break;
      case 1:
        KPanelTokens<WT, 1>(task, panel, y, n, t0);
        break;
      default:
        break;
    }
  }
}

// Panels processed together: memory streams per thread, at the cost of
// registers (Q6_K's 8 group sums per panel). Q4_K measured faster with 2
// (0.75 -> 0.88 of the read bandwidth, 4096 x 4096); Q6_K no better.
template <GgmlType WT>
inline constexpr int kKPanelsAtOnce = WT == GgmlType::kQ4_K ? 2 : 1;

// Rows [row_begin, row_end) of a Q4_K / Q6_K panel task (row_begin a
// multiple of 16), kKPanelsAtOnce panels at a time.
template <GgmlType WT>
void KPanelRows(const MatMulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens > 1) return KPanelRowsBatch<WT>(task, row_begin, row_end);
  const int64_t panel_bytes = PanelBytes(WT, task.cols);
  constexpr int kNP = kKPanelsAtOnce<WT>;
  constexpr int64_t kStep = kNP * kLanes;
  int64_t r0 = row_begin;
  for (; kNP > 1 && r0 + kStep <= row_end; r0 += kStep) {
    KPanels<WT, kNP>(task, task.w + r0 / kLanes * panel_bytes, panel_bytes,
                     task.y + r0, kStep);
  }
  for (; r0 < row_end; r0 += kLanes) {
    KPanels<WT, 1>(task, task.w + r0 / kLanes * panel_bytes, panel_bytes,
                   task.y + r0, std::min<int64_t>(kLanes, row_end - r0));
  }
}

template <GgmlType WT, int R, int... Ts>
void FillRow(TileSet& s, std::integer_sequence<int, Ts...>) {
  ((s.fn[R - 1][Ts] = &KTile<WT, R, Ts + 1>), ...);
}

template <GgmlType WT, int... Rs>
void FillRows(TileSet& s, std::integer_sequence<int, Rs...>) {
  (FillRow<WT, Rs + 1>(s, std::make_integer_sequence<int, kTokens>{}), ...);
}

template <GgmlType WT, int... Rs>
void FillOne(TileSet& s, std::integer_sequence<int, Rs...>) {
  ((s.fn[Rs][0] = &KTile<WT, Rs + 1, 1>), ...);
}

template <GgmlType WT>
TileSet MakeSet() {
  TileSet s;
  s.rows = kBatchRows;
  s.rows_one = kRows;
  s.tokens = kTokens;
  s.kc = 0;  // full rows: the tiles keep their sums in floats, no carry
  s.mc = 64;
  FillRows<WT>(s, std::make_integer_sequence<int, kBatchRows>{});
  FillOne<WT>(s, std::make_integer_sequence<int, kRows>{});
  return s;
}

}  // namespace

void QuantizeRowQ8KAvx512(const float* x, int64_t cols, int8_t* q, float* d,
                          int16_t* bsums) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < cols / kKBlock; ++b) {
    const float* xb = x + b * kKBlock;  // (256): 16 groups of 16
    int8_t* qb = q + b * kKBlock;
    __m512 vmax = _mm512_setzero_ps();
    for (int g = 0; g < 16; ++g) {
      vmax = _mm512_max_ps(
          vmax, _mm512_and_ps(_mm512_loadu_ps(xb + 16 * g), abs_mask));
    }
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qb, 0, kKBlock);
      std::memset(bsums + 16 * b, 0, 16 * sizeof(int16_t));
      continue;
    }
    // The first element of that magnitude gives the sign, as the scalar
    // quantizer's strict comparison keeps it.
    float max = amax;
    for (int g = 0; g < 16; ++g) {
      const __m512 v = _mm512_loadu_ps(xb + 16 * g);
      const __mmask16 hit = _mm512_cmp_ps_mask(
          _mm512_and_ps(v, abs_mask), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        max = xb[16 * g + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vscale = _mm512_set1_ps(iscale);
    const __m512i top = _mm512_set1_epi32(127);
    for (int g = 0; g < 16; ++g) {
      // cvtps rounds half to even (the default MXCSR), as lrintf does.
      const __m512i v =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(
                               vscale, _mm512_loadu_ps(xb + 16 * g))),
                           top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * g),
                       _mm512_cvtepi32_epi8(v));
      bsums[16 * b + g] = static_cast<int16_t>(_mm512_reduce_add_epi32(v));
    }
    d[b] = 1.0f / iscale;
  }
}

void MatMulRowsKQuantAvx512(const MatMulTask& task, int64_t row_begin,
                            int64_t row_end) {
  static const TileSet q2 = MakeSet<GgmlType::kQ2_K>();
  static const TileSet q3 = MakeSet<GgmlType::kQ3_K>();
  static const TileSet q4 = MakeSet<GgmlType::kQ4_K>();
  static const TileSet q5 = MakeSet<GgmlType::kQ5_K>();
  static const TileSet q6 = MakeSet<GgmlType::kQ6_K>();
  if (task.layout == WeightLayout::kPanels) {  // Q4_K, Q6_K (Validate)
    if (task.type == GgmlType::kQ4_K) {
      return KPanelRows<GgmlType::kQ4_K>(task, row_begin, row_end);
    }
    return KPanelRows<GgmlType::kQ6_K>(task, row_begin, row_end);
  }
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
