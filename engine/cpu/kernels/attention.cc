#include "engine/cpu/kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/attention_internal.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu {
namespace {

using internal::kMaxAccFloats;
using internal::kMaxTileRows;
using internal::QueryTile;

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

// A block's K (which = 0) or V (1) rows as floats: an F32 cache's own, a
// Q8_0 cache's dequantized into `scratch` (q * d, as the vector kernels
// load them).
const float* FloatRows(const KvCache& cache, int64_t layer, int64_t block,
                       int64_t which, int64_t kv_head, int64_t n,
                       std::vector<float>& scratch) {
  if (cache.dtype() == GgmlType::kF32) {
    return cache.Rows<float>(layer, block, which, kv_head);
  }
  const int64_t d = cache.shape().head_dim;
  scratch.resize(static_cast<size_t>(n * d));
  (void)DequantizeRow(GgmlType::kQ8_0,
                      cache.Rows<uint8_t>(layer, block, which, kv_head),
                      scratch.data(), n * d);  // whole blocks (kv_cache.h)
  return scratch.data();
}

// The query rows of one token against one KV head: n_group heads of
// head_dim floats at q, results at out, attending to positions [first,
// end); sinks: the heads' (n_group), or null.
struct GroupRows {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t n_group = 0;
  int64_t first = 0;
  int64_t end = 0;
  const float* sinks = nullptr;
};

// 1 / a head's softmax denominator `sum` (relative to `max`), its sink
// joined after the last position; *c: the factor its accumulator takes
// first (attention_group.inc's FinalInverse).
float FinalInverse(float max, float sum, const float* sink, float* c) {
  *c = 1.0f;
  if (sink == nullptr) return 1.0f / sum;
  if (*sink > max) {
    *c = std::exp(max - *sink);
    return 1.0f / (sum * *c + 1.0f);
  }
  return 1.0f / (sum + std::exp(*sink - max));
}

// A token's rows over an F32 or Q8_0 cache, one position at a time.
void AttendGroupF32(const KvCache& cache, int64_t layer, int64_t kv_head,
                    absl::Span<const int32_t> block_table,
                    const GroupRows& rows, int64_t head_dim, float scale) {
  const float* q = rows.q;
  const int64_t n_group = rows.n_group;
  const int64_t block_size = cache.shape().block_size;
  float acc[kMaxAccFloats];              // (n_group, head_dim)
  float running_max[kMaxTileRows];       // (n_group)
  float running_sum[kMaxTileRows];       // (n_group)
  float scores[kMaxAttentionBlockSize];  // (block_size) of one head
  std::fill(acc, acc + n_group * head_dim, 0.0f);
  std::fill(running_max, running_max + n_group,
            -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + n_group, 0.0f);

  for (int64_t start = rows.first / block_size * block_size; start < rows.end;
       start += block_size) {
    const int64_t block = block_table[start / block_size];
    const int64_t lo = std::max<int64_t>(0, rows.first - start);
    const int64_t n = std::min(block_size, rows.end - start);
    thread_local std::vector<float> k_rows, v_rows;  // Q8_0's, as floats
    // (n, head_dim) each
    const float* k = FloatRows(cache, layer, block, 0, kv_head, n, k_rows);
    const float* v = FloatRows(cache, layer, block, 1, kv_head, n, v_rows);
    for (int64_t g = 0; g < n_group; ++g) {
      const float* qg = q + g * head_dim;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = lo; j < n; ++j) {
        scores[j] = Dot(qg, k + j * head_dim, head_dim) * scale;
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max[g], block_max);
      // exp(-inf) = 0 on the first block: nothing to rescale yet.
      const float correction = std::exp(running_max[g] - new_max);
      running_max[g] = new_max;
      float* ag = acc + g * head_dim;
      float sum = running_sum[g] * correction;
      for (int64_t j = lo; j < n; ++j) {
        const float p = std::exp(scores[j] - new_max);
        sum += p;
        ScaleAdd(ag, j == lo ? correction : 1.0f, p, v + j * head_dim,
                 head_dim);
      }
      running_sum[g] = sum;
    }
  }
  for (int64_t g = 0; g < n_group; ++g) {
    float c;
    const float inv =
        FinalInverse(running_max[g], running_sum[g],
                     rows.sinks == nullptr ? nullptr : rows.sinks + g, &c);
    const float f = c * inv;  // inv without a sink
    for (int64_t i = 0; i < head_dim; ++i) {
      rows.out[g * head_dim + i] = acc[g * head_dim + i] * f;
    }
  }
}

inline float RoundToHalf(float x) { return HalfToFloat(FloatToHalf(x)); }

// Row j of a block's F16 K or V rows as floats, into `row` (head_dim).
inline const float* HalfRow(const uint16_t* rows, int64_t j, int64_t head_dim,
                            float* row) {
  for (int64_t i = 0; i < head_dim; ++i) {
    row[i] = HalfToFloat(rows[j * head_dim + i]);
  }
  return row;
}

// A token's rows over an F16 cache: F16 attention as
// attention_group.inc's AttendTileHalfT computes it (all scores, one
// softmax with the sink, weights rounded to F16, then the sum over V), one
// position at a time.
void AttendGroupHalf(const KvCache& cache, int64_t layer, int64_t kv_head,
                     absl::Span<const int32_t> block_table,
                     const GroupRows& rows, int64_t head_dim, float scale) {
  const float* q = rows.q;
  float* out = rows.out;
  const int64_t n_group = rows.n_group;
  const int64_t first = rows.first;
  const int64_t n_positions = rows.end - first;  // the window's
  const int64_t block_size = cache.shape().block_size;
  float q_half[kMaxAccFloats];  // (n_group, head_dim)
  for (int64_t i = 0; i < n_group * head_dim; ++i) {
    q_half[i] = RoundToHalf(q[i]);
  }
  float row[kMaxAccFloats];                 // one K or V row
  thread_local std::vector<float> weights;  // (n_group, n_positions)
  weights.resize(static_cast<size_t>(n_group * n_positions));
  for (int64_t p = 0; p < n_positions; ++p) {
    const int64_t pos = first + p;
    const uint16_t* k =
        cache.Rows<uint16_t>(layer, block_table[pos / block_size], 0, kv_head);
    HalfRow(k, pos % block_size, head_dim, row);
    for (int64_t g = 0; g < n_group; ++g) {
      weights[g * n_positions + p] =
          Dot(q_half + g * head_dim, row, head_dim) * scale;
    }
  }
  for (int64_t g = 0; g < n_group; ++g) {
    float* w = weights.data() + g * n_positions;
    const float* sink = rows.sinks == nullptr ? nullptr : rows.sinks + g;
    float max = *std::max_element(w, w + n_positions);
    if (sink != nullptr) max = std::max(max, *sink);
    float sum = 0;
    for (int64_t p = 0; p < n_positions; ++p)
      sum += (w[p] = std::exp(w[p] - max));
    if (sink != nullptr) sum += std::exp(*sink - max);
    const float inv = 1.0f / sum;
    for (int64_t p = 0; p < n_positions; ++p) w[p] = RoundToHalf(w[p] * inv);
  }
  std::fill(out, out + n_group * head_dim, 0.0f);
  for (int64_t p = 0; p < n_positions; ++p) {
    const int64_t pos = first + p;
    const uint16_t* v =
        cache.Rows<uint16_t>(layer, block_table[pos / block_size], 1, kv_head);
    HalfRow(v, pos % block_size, head_dim, row);
    for (int64_t g = 0; g < n_group; ++g) {
      ScaleAdd(out + g * head_dim, 1.0f, weights[g * n_positions + p], row,
               head_dim);
    }
  }
}

// internal::AttendTileFn: the tile's tokens one at a time.
void AttendTile(const KvCache& cache, int64_t layer, int64_t kv_head,
                absl::Span<const int32_t> block_table, const QueryTile& tile,
                int64_t head_dim, float scale) {
  const auto attend =
      cache.dtype() == GgmlType::kF16 ? AttendGroupHalf : AttendGroupF32;
  const int64_t per_kv = tile.HeadsPerKv();
  for (int64_t i = 0; i < tile.n_tokens; ++i) {
    for (int64_t h = 0; h < tile.KvHeads(); ++h) {
      const int64_t offset = tile.RowOffset(i, h * per_kv, head_dim);
      const GroupRows rows{
          .q = tile.q + offset,
          .out = tile.out + offset,
          .n_group = per_kv,
          .first = tile.First(i),
          .end = tile.Length(i),
          .sinks = tile.sinks == nullptr ? nullptr : tile.sinks + h * per_kv};
      attend(cache, layer, kv_head + h, block_table, rows, head_dim, scale);
    }
  }
}

}  // namespace scalar

internal::AttendTileFn PickAttendTile() {
#if defined(__x86_64__)
  switch (EffectiveIsaLevel()) {
    case IsaLevel::kAvx512:
      return &internal::AttendTileAvx512;
    case IsaLevel::kAvx2:
      return &internal::AttendTileAvx2;
    case IsaLevel::kScalar:
      break;
  }
#endif
  return &scalar::AttendTile;
}

// A run of consecutive tokens of one sequence in the step.
struct TokenRun {
  int64_t begin = 0;
  int64_t count = 0;
};

// The step's tokens cut into runs of the same sequence, each at most
// max_count long.
std::vector<TokenRun> TokenRuns(int64_t n_tokens, const int32_t* token_table,
                                int64_t max_count) {
  std::vector<TokenRun> runs;
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (runs.empty() || runs.back().count == max_count ||
        token_table[t] != token_table[runs.back().begin]) {
      runs.push_back({t, 0});
    }
    ++runs.back().count;
  }
  return runs;
}

// How many KV heads one work item reads: 1, or when every run's rows for
// several whole groups fit one tile (decode: a token per sequence), enough
// to spread the heads evenly over the threads. A block's rows of
// consecutive KV heads lie one after another (kv_cache.h): an item that
// reads several streams through them, which the hardware prefetchers
// follow; one head's rows of consecutive blocks lie 2 * n_kv_heads rows
// apart.
int64_t KvHeadsPerItem(const AttentionParams& params,
                       const std::vector<TokenRun>& runs, int64_t max_rows,
                       int64_t passes, int threads) {
  if (passes > 1) return 1;
  const int64_t group = params.n_heads / params.n_kv_heads;
  int64_t longest = 1;
  for (const TokenRun& run : runs) longest = std::max(longest, run.count);
  const int64_t fit = max_rows / (group * longest);
  const int64_t even = (params.n_kv_heads + threads - 1) / threads;
  return std::max<int64_t>(1, std::min(fit, even));
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
  const int64_t max_rows = std::min(kMaxTileRows, kMaxAccFloats / head_dim);
  const int64_t pass = std::min(group, max_rows);
  const int64_t passes = (group + pass - 1) / pass;
  // Each K/V block read serves up to max_rows query rows: a group's heads
  // and, while room is left, the next tokens of the same sequence.
  const std::vector<TokenRun> runs =
      TokenRuns(n_tokens, token_table, max_rows / pass);
  const int64_t n_runs = static_cast<int64_t>(runs.size());
  const int64_t kv_span =
      KvHeadsPerItem(params, runs, max_rows, passes, pool.num_threads());
  const int64_t n_spans = (params.n_kv_heads + kv_span - 1) / kv_span;
  // Items (KV heads, pass, run), handed out one at a time: prefill tokens
  // late in a sequence cost more than early ones, so a static split would
  // leave threads idle. Runs are the inner index: the threads work through
  // one span of KV heads' runs together, so a prefill's tokens read that
  // head's K/V from the caches rather than DRAM (at 16k positions a
  // layer's K/V is far over the L3, one head's is not).
  const int64_t n_items = n_runs * n_spans * passes;
  const internal::AttendTileFn attend_tile = PickAttendTile();
  std::atomic<int64_t> next{0};
  const auto work = [&](int64_t, int64_t) {
    for (int64_t item;
         (item = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      const TokenRun& run = runs[static_cast<size_t>(item % n_runs)];
      const int64_t kv_head = item / (n_runs * passes) * kv_span;
      const int64_t kv_end = std::min(params.n_kv_heads, kv_head + kv_span);
      const int64_t head_begin =
          kv_head * group + item / n_runs % passes * pass;
      const int64_t offset =
          (run.begin * params.n_heads + head_begin) * head_dim;
      const QueryTile tile{
          .q = q + offset,
          .out = out + offset,
          .token_stride = params.n_heads * head_dim,
          .positions = positions + run.begin,
          .n_tokens = run.count,
          .n_group = kv_span > 1 ? (kv_end - kv_head) * group
                                 : std::min(pass, kv_end * group - head_begin),
          .window = params.window,
          .sinks =
              params.sinks == nullptr ? nullptr : params.sinks + head_begin,
          .heads_per_kv = kv_span > 1 ? group : 0};
      attend_tile(cache, layer, kv_head, block_tables[token_table[run.begin]],
                  tile, head_dim, params.scale);
    }
  };
  // Tiny steps (a short decode) stay on this thread: waking the pool costs
  // more than the work. Q·K plus P·V, per query head and position:
  constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
  int64_t macs = 0;
  for (int64_t t = 0; t < n_tokens && macs < kMinParallelMacs; ++t) {
    int64_t n = int64_t{positions[t]} + 1;
    if (params.window > 0) n = std::min(n, params.window);
    macs += n * params.n_heads * head_dim * 2;
  }
  if (macs < kMinParallelMacs) {
    work(0, 1);
  } else {
    pool.ParallelFor(pool.num_threads(), work);
  }
}

}  // namespace paceline::engine::cpu
