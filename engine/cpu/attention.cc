#include "engine/cpu/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_features.h"

namespace paceline::engine::cpu {
namespace {

// Query heads handled together against one KV head's rows (GQA shares
// each K/V read among them); larger groups go in several passes.
constexpr int64_t kMaxGroup = 16;
constexpr int64_t kMaxAccFloats = 8192;  // kMaxGroup * head_dim cap

namespace scalar {

inline float Dot(const float* a, const float* b, int64_t n) {
  // Eight partial sums: a fixed summation order that the compiler can keep
  // in vector registers.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// y = y * c + p * v
inline void ScaleAdd(float* y, float c, float p, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * c + p * v[i];
}

#include "engine/cpu/attention_group.inc"

}  // namespace scalar

#if defined(__x86_64__)
// AVX2 + FMA: the same loops with explicit 8-wide vectors (see
// matmul_avx2.cc for why a `#pragma GCC target` region); used when the
// kernels' ISA level (cpu_features.h) is avx2 or above.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {

inline float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 =
        _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8),
                           _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 =
        _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s =
      _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

inline void ScaleAdd(float* y, float c, float p, const float* v, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  const __m256 vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(y + i), vc);
    _mm256_storeu_ps(y + i,
                     _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i), scaled));
  }
  for (; i < n; ++i) y[i] = y[i] * c + p * v[i];
}

#include "engine/cpu/attention_group.inc"

}  // namespace avx2
#pragma GCC pop_options
#endif

using AttendGroupFn = void (*)(const KvCache&, int64_t, int64_t,
                               absl::Span<const int32_t>, int64_t, const float*,
                               int64_t, int64_t, float, float*);

AttendGroupFn PickAttendGroup() {
#if defined(__x86_64__)
  if (EffectiveIsaLevel() >= IsaLevel::kAvx2) return &avx2::AttendGroup;
#endif
  return &scalar::AttendGroup;
}

}  // namespace

void PagedAttention(const KvCache& cache, int64_t layer,
                    const AttentionParams& params, const float* q,
                    int64_t n_tokens, const int32_t* positions,
                    const int32_t* token_table,
                    absl::Span<const absl::Span<const int32_t>> block_tables,
                    float* out, ThreadPool& pool) {
  const int64_t head_dim = params.head_dim;
  const int64_t group = params.n_heads / params.n_kv_heads;
  const int64_t pass = std::min({group, kMaxGroup, kMaxAccFloats / head_dim});
  const int64_t passes = (group + pass - 1) / pass;
  // Items (token, KV head, pass), handed out one at a time: prefill tokens
  // late in a sequence cost more than early ones, so a static split would
  // leave threads idle.
  const int64_t n_items = n_tokens * params.n_kv_heads * passes;
  const AttendGroupFn attend_group = PickAttendGroup();
  std::atomic<int64_t> next{0};
  const auto work = [&](int64_t, int64_t) {
    for (int64_t item;
         (item = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      const int64_t t = item / (params.n_kv_heads * passes);
      const int64_t kv_head = item / passes % params.n_kv_heads;
      const int64_t head_begin = kv_head * group + item % passes * pass;
      const int64_t n_group =
          std::min(pass, (kv_head + 1) * group - head_begin);
      const int64_t offset = (t * params.n_heads + head_begin) * head_dim;
      attend_group(cache, layer, kv_head, block_tables[token_table[t]],
                   int64_t{positions[t]} + 1, q + offset, n_group, head_dim,
                   params.scale, out + offset);
    }
  };
  // Tiny steps (a short decode) stay on this thread: waking the pool costs
  // more than the work. Q·K plus P·V, per query head and position:
  constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
  int64_t macs = 0;
  for (int64_t t = 0; t < n_tokens && macs < kMinParallelMacs; ++t) {
    macs += (int64_t{positions[t]} + 1) * params.n_heads * head_dim * 2;
  }
  if (macs < kMinParallelMacs) {
    work(0, 1);
  } else {
    pool.ParallelFor(pool.num_threads(), work);
  }
}

}  // namespace paceline::engine::cpu
