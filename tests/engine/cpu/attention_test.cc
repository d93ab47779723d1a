#include "engine/cpu/kernels/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/attention_internal.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"

// PagedAttention against a plain reference: K/V of each sequence kept
// contiguous, softmax in double, no paging. Blocks are scattered over the
// pool in random order so the tables really matter. Every ISA level the
// CPU runs is checked (SetIsaLevelCap), and so is the kernels' vectorized
// exp against std::exp.

namespace paceline::engine::cpu {
namespace {

struct Case {
  int64_t n_heads;
  int64_t n_kv_heads;
  int64_t head_dim;
  int64_t block_size;
  int threads;
};

class PagedAttentionTest : public testing::TestWithParam<Case> {};

// An F16 cache holds K and V rounded to F16 (the reference uses the
// rounded values and q rounded the same way); the kernel also rounds each
// softmax weight to F16 before it multiplies V, which moves an output by
// at most 2^-11 of sum_p weight_p |V_p| (the bound allowed on top). A
// Q8_0 cache holds each row as its 32-element blocks decode (the reference
// quantizes and dequantizes the row with engine/gguf's codec); q, scores
// and weights stay float.
void ExpectMatchesReference(const Case& c, GgmlType dtype) {
  const bool half = dtype == GgmlType::kF16;
  if (dtype == GgmlType::kQ8_0 && c.head_dim % 32 != 0) {
    GTEST_SKIP() << "Q8_0 rows are whole 32-element blocks";
  }
  const auto stored = [half](float x) {
    return half ? HalfToFloat(FloatToHalf(x)) : x;
  };
  // A row as the cache gives it back.
  const auto stored_row = [&](std::vector<float> row) {
    if (dtype == GgmlType::kQ8_0) {
      std::vector<uint8_t> bytes(row.size() / 32 * 34);
      EXPECT_TRUE(
          QuantizeRow(dtype, row.data(), std::ssize(row), bytes.data()).ok());
      EXPECT_TRUE(
          DequantizeRow(dtype, bytes.data(), row.data(), std::ssize(row)).ok());
    } else {
      for (float& x : row) x = stored(x);
    }
    return row;
  };
  // (positions already cached, new tokens) per sequence: decode tokens at
  // block boundaries and between them, short and long prefill chunks.
  const std::vector<std::pair<int64_t, int64_t>> seqs = {
      {0, 1}, {0, 9}, {37, 1}, {20, 6}, {3, 1}, {130, 2}, {47, 1}, {0, 33}};
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  int64_t total_blocks = 0;
  for (const auto& [cached, fresh] : seqs) {
    total_blocks += (cached + fresh + c.block_size - 1) / c.block_size;
  }
  KvCacheShape shape{.n_layers = 2,
                     .n_kv_heads = c.n_kv_heads,
                     .head_dim = c.head_dim,
                     .block_size = c.block_size,
                     .num_blocks = total_blocks + 3,
                     .dtype = dtype};
  auto cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  std::vector<int32_t> free_blocks(shape.num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);

  const int64_t layer = 1;
  std::vector<std::vector<int32_t>> tables(seqs.size());
  // Reference K/V: [seq][kv_head][pos][dim].
  std::vector<std::vector<float>> ref_k(seqs.size()), ref_v(seqs.size());
  std::vector<int32_t> positions, token_table;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t len = seqs[s].first + seqs[s].second;
    for (int64_t b = 0; b < (len + c.block_size - 1) / c.block_size; ++b) {
      tables[s].push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    ref_k[s].resize(c.n_kv_heads * len * c.head_dim);
    ref_v[s].resize(c.n_kv_heads * len * c.head_dim);
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      for (int64_t p = 0; p < len; ++p) {
        std::vector<float> k(c.head_dim), v(c.head_dim);
        for (int64_t i = 0; i < c.head_dim; ++i) {
          k[i] = normal(rng);
          v[i] = normal(rng);
        }
        const std::vector<float> ks = stored_row(k), vs = stored_row(v);
        std::copy(ks.begin(), ks.end(),
                  ref_k[s].begin() + (h * len + p) * c.head_dim);
        std::copy(vs.begin(), vs.end(),
                  ref_v[s].begin() + (h * len + p) * c.head_dim);
        const int64_t block = tables[s][p / c.block_size];
        (*cache)->WriteRow(layer, block, 0, h, p % c.block_size, k.data());
        (*cache)->WriteRow(layer, block, 1, h, p % c.block_size, v.data());
      }
    }
    for (int64_t i = 0; i < seqs[s].second; ++i) {
      positions.push_back(static_cast<int32_t>(seqs[s].first + i));
      token_table.push_back(static_cast<int32_t>(s));
    }
  }
  const int64_t n_tokens = static_cast<int64_t>(positions.size());
  std::vector<float> q(n_tokens * c.n_heads * c.head_dim);
  for (float& x : q) x = 2.0f * normal(rng);  // peaky enough softmaxes
  std::vector<absl::Span<const int32_t>> spans(tables.begin(), tables.end());

  AttentionParams params{.n_heads = c.n_heads,
                         .n_kv_heads = c.n_kv_heads,
                         .head_dim = c.head_dim,
                         .scale = 1.0f / std::sqrt(float(c.head_dim))};
  ThreadPool pool(c.threads);
  for (int level = 0; level <= static_cast<int>(GetCpuFeatures().max_level);
       ++level) {
    SetIsaLevelCap(static_cast<IsaLevel>(level));
    SCOPED_TRACE(IsaLevelName(static_cast<IsaLevel>(level)));
    std::vector<float> out(q.size(), -1.0f);
    PagedAttention(**cache, layer, params, q.data(), n_tokens, positions.data(),
                   token_table.data(), spans, out.data(), pool);

    const int64_t group = c.n_heads / c.n_kv_heads;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const size_t s = token_table[t];
      const int64_t len = seqs[s].first + seqs[s].second;
      const int64_t n_pos = positions[t] + 1;
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const int64_t kvh = h / group;
        const float* qh = &q[(t * c.n_heads + h) * c.head_dim];
        std::vector<double> scores(n_pos);
        double max = -1e300;
        for (int64_t p = 0; p < n_pos; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < c.head_dim; ++i) {
            dot += double{stored(qh[i])} *
                   ref_k[s][(kvh * len + p) * c.head_dim + i];
          }
          scores[p] = dot * params.scale;
          max = std::max(max, scores[p]);
        }
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - max));
        for (int64_t i = 0; i < c.head_dim; ++i) {
          double ref = 0, magnitude = 0;
          for (int64_t p = 0; p < n_pos; ++p) {
            const double term =
                scores[p] / sum * ref_v[s][(kvh * len + p) * c.head_dim + i];
            ref += term;
            magnitude += std::fabs(term);
          }
          const double weight_rounding = half ? magnitude / 2048 : 0;
          const float got = out[(t * c.n_heads + h) * c.head_dim + i];
          ASSERT_LE(std::fabs(got - ref),
                    1e-5 + 1e-4 * std::fabs(ref) + weight_rounding)
              << "token " << t << " head " << h << " dim " << i;
        }
      }
    }
    // Each token alone gives the same bits as in the batch.
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int64_t row = c.n_heads * c.head_dim;
      std::vector<float> alone(row);
      PagedAttention(**cache, layer, params, q.data() + t * row, 1,
                     &positions[t], &token_table[t], spans, alone.data(), pool);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), out.begin() + t * row))
          << "token " << t;
    }
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

TEST_P(PagedAttentionTest, MatchesContiguousReference) {
  ExpectMatchesReference(GetParam(), GgmlType::kF32);
}

TEST_P(PagedAttentionTest, F16CacheMatchesContiguousReference) {
  ExpectMatchesReference(GetParam(), GgmlType::kF16);
}

TEST_P(PagedAttentionTest, Q8CacheMatchesContiguousReference) {
  ExpectMatchesReference(GetParam(), GgmlType::kQ8_0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionTest,
    testing::Values(Case{8, 4, 8, 16, 1},     // stories260K's heads
                    Case{4, 4, 64, 16, 2},    // no GQA
                    Case{8, 2, 32, 5, 2},     // odd block size
                    Case{6, 3, 16, 1, 2},     // one position per block
                    Case{32, 1, 64, 16, 2},   // group over one pass
                    Case{16, 8, 128, 32, 2},  // qwen3-like heads
                    Case{12, 12, 64, 16, 1},  // stories110m's heads
                    Case{12, 4, 64, 7, 2},    // GQA, block not of 8 or 16
                    Case{8, 2, 40, 16, 1},    // head_dim not of 16
                    Case{4, 2, 128, 48, 1},   // 3 tiles per block
                    Case{2, 1, 24, 256, 1}),  // kMaxAttentionBlockSize
    // Names from the shape (the default prints the struct's bytes,
    // padding included, so ctest's names changed between builds).
    [](const testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "h" + std::to_string(c.n_heads) + "_kv" +
             std::to_string(c.n_kv_heads) + "_d" + std::to_string(c.head_dim) +
             "_b" + std::to_string(c.block_size) + "_t" +
             std::to_string(c.threads);
    });

TEST(PagedAttentionTest, SameResultForAnyThreadCount) {
  KvCacheShape shape{.n_layers = 1,
                     .n_kv_heads = 2,
                     .head_dim = 16,
                     .block_size = 4,
                     .num_blocks = 8};
  auto cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int64_t b = 0; b < 8; ++b) {
    for (int64_t w = 0; w < 2; ++w) {
      for (int64_t h = 0; h < 2; ++h) {
        float* r = (*cache)->Rows(0, b, w, h);
        for (int64_t i = 0; i < 4 * 16; ++i) r[i] = normal(rng);
      }
    }
  }
  const std::vector<int32_t> table = {7, 2, 5, 0, 3};
  const std::vector<absl::Span<const int32_t>> spans = {table};
  std::vector<int32_t> positions(20), token_table(20, 0);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> q(20 * 4 * 16);
  for (float& x : q) x = normal(rng);
  AttentionParams params{
      .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .scale = 0.25f};
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(q.size());
    PagedAttention(**cache, 0, params, q.data(), 20, positions.data(),
                   token_table.data(), spans, out.data(), pool);
    outs.push_back(out);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

// Sliding windows and attention sinks (attention.h): token t at position
// P reads [max(0, P - window + 1), P]; sinks[h] joins the softmax's
// denominator (and max) only, unscaled.

// The step of a windowed test: sequences (cached positions, new tokens)
// in scattered blocks, K/V as the cache gives them back.
struct WindowStep {
  std::unique_ptr<KvCache> cache;
  std::vector<std::vector<int32_t>> tables;
  std::vector<int64_t> lengths;  // (sequences)
  // [seq][kv_head][pos][dim], as stored (F16- or Q8_0-rounded)
  std::vector<std::vector<float>> k, v;
  std::vector<int32_t> positions, token_table;
  std::vector<float> q;  // (tokens, n_heads, head_dim)
};

const std::vector<std::pair<int64_t, int64_t>> kWindowSeqs = {
    {0, 1}, {37, 1}, {20, 6}, {130, 2}, {0, 33}, {60, 20}, {15, 1}};

// A row as a cache of `dtype` gives it back.
std::vector<float> StoredRow(GgmlType dtype, std::vector<float> row) {
  if (dtype == GgmlType::kQ8_0) {
    std::vector<uint8_t> bytes(row.size() / 32 * 34);
    EXPECT_TRUE(
        QuantizeRow(dtype, row.data(), std::ssize(row), bytes.data()).ok());
    EXPECT_TRUE(
        DequantizeRow(dtype, bytes.data(), row.data(), std::ssize(row)).ok());
  } else if (dtype == GgmlType::kF16) {
    for (float& x : row) x = HalfToFloat(FloatToHalf(x));
  }
  return row;
}

WindowStep MakeWindowStep(const Case& c, GgmlType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  WindowStep w;
  int64_t total_blocks = 0;
  for (const auto& [cached, fresh] : kWindowSeqs) {
    total_blocks += (cached + fresh + c.block_size - 1) / c.block_size;
  }
  const KvCacheShape shape{.n_layers = 1,
                           .n_kv_heads = c.n_kv_heads,
                           .head_dim = c.head_dim,
                           .block_size = c.block_size,
                           .num_blocks = total_blocks + 2,
                           .dtype = dtype};
  auto cache = KvCache::Create(shape);
  EXPECT_TRUE(cache.ok()) << cache.status();
  w.cache = *std::move(cache);
  std::vector<int32_t> free_blocks(shape.num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  for (const auto& [cached, fresh] : kWindowSeqs) {
    const int64_t len = cached + fresh, s = std::ssize(w.lengths);
    w.lengths.push_back(len);
    w.tables.emplace_back();
    for (int64_t b = 0; b < (len + c.block_size - 1) / c.block_size; ++b) {
      w.tables.back().push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    w.k.emplace_back(c.n_kv_heads * len * c.head_dim);
    w.v.emplace_back(c.n_kv_heads * len * c.head_dim);
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      for (int64_t p = 0; p < len; ++p) {
        std::vector<float> k(c.head_dim), v(c.head_dim);
        for (int64_t i = 0; i < c.head_dim; ++i) {
          k[i] = normal(rng);
          v[i] = normal(rng);
        }
        const int64_t block = w.tables.back()[p / c.block_size];
        w.cache->WriteRow(0, block, 0, h, p % c.block_size, k.data());
        w.cache->WriteRow(0, block, 1, h, p % c.block_size, v.data());
        const std::vector<float> ks = StoredRow(dtype, k);
        const std::vector<float> vs = StoredRow(dtype, v);
        std::copy(ks.begin(), ks.end(),
                  w.k.back().begin() + (h * len + p) * c.head_dim);
        std::copy(vs.begin(), vs.end(),
                  w.v.back().begin() + (h * len + p) * c.head_dim);
      }
    }
    for (int64_t i = 0; i < fresh; ++i) {
      w.positions.push_back(static_cast<int32_t>(cached + i));
      w.token_table.push_back(static_cast<int32_t>(s));
    }
  }
  w.q.resize(w.positions.size() * c.n_heads * c.head_dim);
  for (float& x : w.q) x = 2.0f * normal(rng);  // peaky enough softmaxes
  return w;
}

int64_t WindowFirst(int64_t position, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
}

// Fills every K/V row of the positions no token of the step reads with
// NaN (all-ones bytes: NaN as F32, F16 and as a Q8_0 block's scale):
// whole blocks before the windows, and the slots before them in the
// first block read.
void PoisonOutsideWindows(WindowStep& w, const Case& c, int64_t window) {
  const int64_t row_bytes =
      static_cast<int64_t>(KvCache::RowBytes(w.cache->dtype(), c.head_dim));
  for (size_t s = 0; s < w.tables.size(); ++s) {
    int64_t first = w.lengths[s];
    for (size_t t = 0; t < w.positions.size(); ++t) {
      if (w.token_table[t] != static_cast<int32_t>(s)) continue;
      first = std::min(first, WindowFirst(w.positions[t], window));
    }
    for (int64_t p = 0; p < first; ++p) {
      for (int64_t which = 0; which < 2; ++which) {
        for (int64_t h = 0; h < c.n_kv_heads; ++h) {
          uint8_t* row = w.cache->Rows<uint8_t>(
              0, w.tables[s][p / c.block_size], which, h);
          std::memset(row + p % c.block_size * row_bytes, 0xFF, row_bytes);
        }
      }
    }
  }
}

// out's row of (token t, head h) against a double softmax over t's
// window, the sink in its max and denominator; F16 caches: q rounded to
// F16 as the kernel rounds it, and each weight's rounding to F16 allowed.
void ExpectWindowRow(const WindowStep& w, const Case& c, GgmlType dtype,
                     const AttentionParams& params, const float* out, int64_t t,
                     int64_t h) {
  const bool half = dtype == GgmlType::kF16;
  const size_t s = w.token_table[t];
  const int64_t len = w.lengths[s];
  const int64_t kvh = h / (c.n_heads / c.n_kv_heads);
  const int64_t first = WindowFirst(w.positions[t], params.window);
  const int64_t end = int64_t{w.positions[t]} + 1;
  const float* qh = &w.q[(t * c.n_heads + h) * c.head_dim];
  std::vector<double> e(end - first);
  double max = params.sinks == nullptr ? -1e300 : params.sinks[h];
  for (int64_t p = first; p < end; ++p) {
    double dot = 0;
    for (int64_t i = 0; i < c.head_dim; ++i) {
      const float qi = half ? HalfToFloat(FloatToHalf(qh[i])) : qh[i];
      dot += double{qi} * w.k[s][(kvh * len + p) * c.head_dim + i];
    }
    e[p - first] = dot * params.scale;
    max = std::max(max, e[p - first]);
  }
  double sum = params.sinks == nullptr ? 0 : std::exp(params.sinks[h] - max);
  for (double& x : e) sum += (x = std::exp(x - max));
  for (int64_t i = 0; i < c.head_dim; ++i) {
    double ref = 0, magnitude = 0;
    for (int64_t p = first; p < end; ++p) {
      const double term =
          e[p - first] / sum * w.v[s][(kvh * len + p) * c.head_dim + i];
      ref += term;
      magnitude += std::fabs(term);
    }
    const double weight_rounding = half ? magnitude / 2048 : 0;
    const float got = out[(t * c.n_heads + h) * c.head_dim + i];
    ASSERT_LE(std::fabs(got - ref),
              1e-5 + 1e-4 * std::fabs(ref) + weight_rounding)
        << "token " << t << " (position " << w.positions[t] << ") head " << h
        << " dim " << i;
  }
}

// Windows below, crossing, at and past the block size and the contexts
// (the longest context is 132; sequence 1's is 38, sequence 6's 16).
const int64_t kWindows[] = {1, 3, 7, 16, 17, 33, 38, 40, 131, 133, 1000};

enum class SinkKind { kNone, kSmall, kLarge, kNegative };

std::vector<float> MakeSinks(SinkKind kind, int64_t n_heads) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> sinks(n_heads);
  for (float& x : sinks) {
    switch (kind) {
      case SinkKind::kSmall:  // beside the scores
        x = normal(rng);
        break;
      case SinkKind::kLarge:  // above every score: the sink dominates
        x = 30.0f + 5.0f * normal(rng);
        break;
      case SinkKind::kNegative:  // no weight at all
        x = -80.0f + normal(rng);
        break;
      case SinkKind::kNone:
        break;
    }
  }
  return sinks;
}

class WindowedAttentionTest : public testing::TestWithParam<Case> {};

// Every window and sink kind, at every ISA level, against the reference
// and against the scalar path; blocks outside the windows hold NaN; each
// token alone gives the bits it gives in the batch.
void ExpectWindowsMatchReference(const Case& c, GgmlType dtype) {
  if (dtype == GgmlType::kQ8_0 && c.head_dim % 32 != 0) {
    GTEST_SKIP() << "Q8_0 rows are whole 32-element blocks";
  }
  ThreadPool pool(c.threads);
  const int64_t row = c.n_heads * c.head_dim;
  for (const int64_t window : kWindows) {
    WindowStep w = MakeWindowStep(c, dtype, static_cast<uint32_t>(window));
    PoisonOutsideWindows(w, c, window);
    const int64_t n_tokens = std::ssize(w.positions);
    std::vector<absl::Span<const int32_t>> spans(w.tables.begin(),
                                                 w.tables.end());
    for (const SinkKind kind : {SinkKind::kNone, SinkKind::kSmall,
                                SinkKind::kLarge, SinkKind::kNegative}) {
      SCOPED_TRACE(testing::Message() << "window " << window << " sinks "
                                      << static_cast<int>(kind));
      const std::vector<float> sinks = MakeSinks(kind, c.n_heads);
      const AttentionParams params{
          .n_heads = c.n_heads,
          .n_kv_heads = c.n_kv_heads,
          .head_dim = c.head_dim,
          .scale = 1.0f / std::sqrt(float(c.head_dim)),
          .window = window,
          .sinks = kind == SinkKind::kNone ? nullptr : sinks.data()};
      std::vector<float> scalar_out;
      for (int level = 0; level <= static_cast<int>(GetCpuFeatures().max_level);
           ++level) {
        SetIsaLevelCap(static_cast<IsaLevel>(level));
        SCOPED_TRACE(IsaLevelName(static_cast<IsaLevel>(level)));
        std::vector<float> out(w.q.size(), -1.0f);
        PagedAttention(*w.cache, 0, params, w.q.data(), n_tokens,
                       w.positions.data(), w.token_table.data(), spans,
                       out.data(), pool);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t h = 0; h < c.n_heads; ++h) {
            ExpectWindowRow(w, c, dtype, params, out.data(), t, h);
            if (testing::Test::HasFatalFailure()) return;
          }
        }
        if (level == 0) scalar_out = out;
        // The ISA levels agree with the scalar path as closely as each
        // does with the reference (F16: weights may round the other way).
        const double atol = dtype == GgmlType::kF16 ? 2e-3 : 2e-5;
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], scalar_out[i],
                      atol + 2e-4 * std::fabs(scalar_out[i]))
              << "element " << i;
        }
        for (int64_t t = 0; t < n_tokens; t += 5) {
          std::vector<float> alone(row);
          PagedAttention(*w.cache, 0, params, w.q.data() + t * row, 1,
                         &w.positions[t], &w.token_table[t], spans,
                         alone.data(), pool);
          ASSERT_TRUE(
              std::equal(alone.begin(), alone.end(), out.begin() + t * row))
              << "token " << t;
        }
      }
    }
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

TEST_P(WindowedAttentionTest, F32CacheMatchesReference) {
  ExpectWindowsMatchReference(GetParam(), GgmlType::kF32);
}

TEST_P(WindowedAttentionTest, F16CacheMatchesReference) {
  ExpectWindowsMatchReference(GetParam(), GgmlType::kF16);
}

TEST_P(WindowedAttentionTest, Q8CacheMatchesReference) {
  ExpectWindowsMatchReference(GetParam(), GgmlType::kQ8_0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WindowedAttentionTest,
    testing::Values(Case{8, 2, 64, 16, 2},    // GQA, gpt-oss-like group
                    Case{4, 4, 32, 1, 1},     // one position per block
                    Case{6, 3, 40, 5, 2},     // odd block, head_dim of 8
                    Case{16, 2, 128, 32, 2},  // two passes of tokens
                    Case{4, 1, 64, 7, 1}),
    [](const testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "h" + std::to_string(c.n_heads) + "_kv" +
             std::to_string(c.n_kv_heads) + "_d" + std::to_string(c.head_dim) +
             "_b" + std::to_string(c.block_size) + "_t" +
             std::to_string(c.threads);
    });

// The untouched path: a window past every context and sinks of -inf give
// the same bits as window 0 without sinks, at every ISA level and cache
// type.
TEST(WindowedAttentionTest, WideWindowAndEmptySinksChangeNoBit) {
  const Case c{8, 2, 64, 16, 2};
  ThreadPool pool(c.threads);
  for (GgmlType dtype : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
    const WindowStep w = MakeWindowStep(c, dtype, 5);
    std::vector<absl::Span<const int32_t>> spans(w.tables.begin(),
                                                 w.tables.end());
    const std::vector<float> sinks(c.n_heads,
                                   -std::numeric_limits<float>::infinity());
    const AttentionParams plain{.n_heads = c.n_heads,
                                .n_kv_heads = c.n_kv_heads,
                                .head_dim = c.head_dim,
                                .scale = 0.125f};
    AttentionParams wide = plain;
    wide.window = 1 << 20;
    wide.sinks = sinks.data();
    for (int level = 0; level <= static_cast<int>(GetCpuFeatures().max_level);
         ++level) {
      SetIsaLevelCap(static_cast<IsaLevel>(level));
      SCOPED_TRACE(IsaLevelName(static_cast<IsaLevel>(level)));
      std::vector<float> a(w.q.size()), b(w.q.size());
      const auto run = [&](const AttentionParams& params, float* out) {
        PagedAttention(*w.cache, 0, params, w.q.data(), std::ssize(w.positions),
                       w.positions.data(), w.token_table.data(), spans, out,
                       pool);
      };
      run(plain, a.data());
      run(wide, b.data());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    }
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

// Distance in representable floats (both finite or both infinite).
int64_t UlpDistance(float a, float b) {
  const auto ordered = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? int64_t{std::numeric_limits<int32_t>::min()} - i
                 : int64_t{i};
  };
  return std::abs(ordered(a) - ordered(b));
}

// The vectorized exp of each ISA level the CPU runs: within 2 ulp of
// std::exp (glibc's is correctly rounded in practice) over all of
// [-110, 90], subnormal results included; exact where it must be.
TEST(AttentionExpTest, MatchesStdExpWithin2Ulp) {
  using ExpFn = void (*)(const float*, int64_t, float*);
  std::vector<std::pair<IsaLevel, ExpFn>> levels;
#if defined(__x86_64__)
  levels = {{IsaLevel::kAvx2, &internal::ExpAvx2},
            {IsaLevel::kAvx512, &internal::ExpAvx512}};
#endif
  // Every 251st float in [-110, 90] (about 9 million), then the edges.
  std::vector<float> x;
  for (float v = -110.0f; v < 90.0f;) {
    x.push_back(v);
    const int32_t bits = std::bit_cast<int32_t>(v);
    v = std::bit_cast<float>(v < 0 ? bits - 251 : bits + 251);
    if (v < 0 && v > -1e-30f) v = 0.0f;
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -87.33655f, -103.97208f,
                  -103.9f, 88.72283f, 88.72284f, -1000.0f, -inf, inf}) {
    x.push_back(v);
  }
  for (const auto& [level, exp] : levels) {
    if (GetCpuFeatures().max_level < level) continue;
    SCOPED_TRACE(IsaLevelName(level));
    std::vector<float> y(x.size());
    exp(x.data(), static_cast<int64_t>(x.size()), y.data());
    int64_t worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::exp(x[i]);
      const int64_t ulp = UlpDistance(y[i], want);
      worst = std::max(worst, ulp);
      ASSERT_LE(ulp, 2) << "exp(" << x[i] << ") = " << y[i] << ", want "
                        << want;
    }
    RecordProperty(std::string(IsaLevelName(level)) + "_max_ulp",
                   static_cast<int>(worst));
    EXPECT_EQ(y[x.size() - 12], 1.0f);  // exp(0)
    EXPECT_EQ(y[x.size() - 11], 1.0f);  // exp(-0)
    EXPECT_EQ(y[x.size() - 3], 0.0f);   // exp(-1000)
    EXPECT_EQ(y[x.size() - 2], 0.0f);   // exp(-inf)
    EXPECT_EQ(y[x.size() - 1], inf);    // exp(inf)
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float nan_out = 0;
    exp(&nan, 1, &nan_out);
    EXPECT_TRUE(std::isnan(nan_out));
  }
}

TEST(KvCacheTest, CopyBlockCopiesEveryLayer) {
  KvCacheShape shape{.n_layers = 3,
                     .n_kv_heads = 2,
                     .head_dim = 4,
                     .block_size = 2,
                     .num_blocks = 4};
  auto cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok());
  for (int64_t l = 0; l < 3; ++l) {
    for (int64_t w = 0; w < 2; ++w) {
      for (int64_t h = 0; h < 2; ++h) {
        float* r = (*cache)->Rows(l, 1, w, h);
        for (int64_t i = 0; i < 8; ++i) r[i] = float(l * 100 + w * 10 + h + i);
      }
    }
  }
  (*cache)->CopyBlock(1, 3);
  for (int64_t l = 0; l < 3; ++l) {
    for (int64_t w = 0; w < 2; ++w) {
      for (int64_t h = 0; h < 2; ++h) {
        const float* r = (*cache)->Rows(l, 3, w, h);
        for (int64_t i = 0; i < 8; ++i) {
          EXPECT_EQ(r[i], float(l * 100 + w * 10 + h + i));
        }
      }
    }
  }
  EXPECT_EQ((*cache)->bytes(), size_t{3 * 4 * 2 * 2 * 2 * 4 * 4});
}

// An F16 cache stores each element rounded to the nearest F16 (ties to
// even, overflow to inf), in half the bytes, and copies blocks whole.
TEST(KvCacheTest, F16CacheRoundsToNearestAndCopiesBlocks) {
  KvCacheShape shape{.n_layers = 2,
                     .n_kv_heads = 1,
                     .head_dim = 6,
                     .block_size = 2,
                     .num_blocks = 3,
                     .dtype = GgmlType::kF16};
  auto cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->bytes(), size_t{2 * 3 * 2 * 1 * 2 * 6 * 2});
  // 1 + 2^-11 is halfway between 1 and the next F16 (1 + 2^-10): to even.
  const float row[6] = {1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-20f,
                        -3.0f,           70000.0f,
                        1e-8f,           0.1f};
  const uint16_t want[6] = {0x3C00, 0x3C01, 0xC200, 0x7C00, 0x0000, 0x2E66};
  for (int64_t l = 0; l < 2; ++l) (*cache)->WriteRow(l, 0, 1, 0, 1, row);
  (*cache)->CopyBlock(0, 2);
  for (int64_t l = 0; l < 2; ++l) {
    const uint16_t* v = (*cache)->Rows<uint16_t>(l, 2, 1, 0) + 6;
    for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], want[i]) << l << " " << i;
  }
}

// Every ISA level writes the same F16 bytes (F16C's conversion against
// FloatToHalf): halfway cases, subnormals, overflow, infinities, NaNs
// quiet and signalling, and 1,000 random values over the whole range.
TEST(KvCacheTest, F16RowsAreTheSameBytesAtEveryLevel) {
  constexpr int64_t kDim = 1024 + 5;  // a tail past the vectors
  KvCacheShape shape{.n_layers = 1,
                     .n_kv_heads = 1,
                     .head_dim = kDim,
                     .block_size = 1,
                     .num_blocks = 1,
                     .dtype = GgmlType::kF16};
  std::vector<float> row = {1.0f + 0x1p-11f,
                            1.0f + 0x1p-10f + 0x1p-11f,
                            0x1p-25f,
                            0x1p-24f + 0x1p-25f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::signaling_NaN(),
                            -0.0f};
  std::mt19937 rng(5);
  while (static_cast<int64_t>(row.size()) < kDim) {
    row.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
  std::vector<std::vector<uint16_t>> bytes;
  for (int level = 0; level <= static_cast<int>(GetCpuFeatures().max_level);
       ++level) {
    SetIsaLevelCap(static_cast<IsaLevel>(level));
    auto cache = KvCache::Create(shape);
    ASSERT_TRUE(cache.ok()) << cache.status();
    (*cache)->WriteRow(0, 0, 0, 0, 0, row.data());
    const uint16_t* v = (*cache)->Rows<uint16_t>(0, 0, 0, 0);
    bytes.emplace_back(v, v + kDim);
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
  for (int64_t i = 0; i < kDim; ++i)
    ASSERT_EQ(bytes[0][i], FloatToHalf(row[i]));
  for (size_t l = 1; l < bytes.size(); ++l) EXPECT_EQ(bytes[l], bytes[0]) << l;
}

// Q8_0 rows are ggml's block_q8_0 (an F16 d = max|x| / 127, then int8
// round(x / d) with the float d), 34 bytes per 32 elements, and blocks
// copy whole.
TEST(KvCacheTest, Q8CacheStoresGgmlBlocksAndCopiesThem) {
  KvCacheShape shape{.n_layers = 2,
                     .n_kv_heads = 2,
                     .head_dim = 64,
                     .block_size = 4,
                     .num_blocks = 3,
                     .dtype = GgmlType::kQ8_0};
  auto cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(KvCache::RowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ((*cache)->bytes(), size_t{2 * 3 * 2 * 2 * 4 * 68});
  float row[64];
  for (int i = 0; i < 64; ++i) row[i] = (i - 20) * (i < 32 ? 0.25f : -3.0f);
  for (int64_t l = 0; l < 2; ++l) (*cache)->WriteRow(l, 1, 0, 1, 3, row);
  (*cache)->CopyBlock(1, 2);
  for (int64_t l = 0; l < 2; ++l) {
    const uint8_t* r = (*cache)->Rows<uint8_t>(l, 2, 0, 1) + 3 * 68;
    for (int b = 0; b < 2; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(row[32 * b + i]));
      }
      const float d = amax / 127;
      uint16_t got_d;
      std::memcpy(&got_d, r + 34 * b, 2);
      EXPECT_EQ(got_d, FloatToHalf(d)) << l << " " << b;
      for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(static_cast<int8_t>(r[34 * b + 2 + i]),
                  static_cast<int8_t>(std::round(row[32 * b + i] * (1.0f / d))))
            << l << " " << b << " " << i;
      }
    }
  }
}

TEST(KvCacheTest, RejectsOtherBlockQuantizedDtypes) {
  const absl::StatusOr<std::unique_ptr<KvCache>> cache =
      KvCache::Create(KvCacheShape{.n_layers = 1,
                                   .n_kv_heads = 1,
                                   .head_dim = 32,
                                   .block_size = 16,
                                   .num_blocks = 1,
                                   .dtype = GgmlType::kQ4_0});
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("Q4_0"), std::string::npos)
      << cache.status();
}

// Q8_0 rows are whole 32-element blocks: a head of 48 is refused.
TEST(KvCacheTest, Q8NeedsAHeadSizeOfWholeBlocks) {
  const absl::StatusOr<std::unique_ptr<KvCache>> cache =
      KvCache::Create(KvCacheShape{.n_layers = 1,
                                   .n_kv_heads = 1,
                                   .head_dim = 48,
                                   .block_size = 16,
                                   .num_blocks = 1,
                                   .dtype = GgmlType::kQ8_0});
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("multiple of 32"), std::string::npos)
      << cache.status();
}

TEST(KvCacheTest, RejectsEmptyShapes) {
  EXPECT_FALSE(KvCache::Create(KvCacheShape{.n_layers = 1,
                                            .n_kv_heads = 1,
                                            .head_dim = 0,
                                            .block_size = 16,
                                            .num_blocks = 1})
                   .ok());
}

}  // namespace
}  // namespace paceline::engine::cpu
