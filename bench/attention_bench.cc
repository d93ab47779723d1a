// CPU paged attention for decode: one query token of one sequence at
// position P, stories110m's heads (12 query and KV heads, head_dim 64),
// blocks of 16 positions scattered over the pool, on one thread.
//
//   BM_AttentionDecode/P/isa/L/kv  one PagedAttention call; each iteration
//                                reads the next of L layers: with 12, as
//                                decode does (K/V mostly from L3), with 1
//                                the kernel alone (K/V from L1/L2)
//   BM_AttentionLong/P/kv/T      the same at long contexts (12 layers: K/V
//                                from DRAM past ~1k positions), the
//                                default ISA, on T threads
//   BM_AttentionPrefill/P/kv/T   a prefill chunk: the 512 tokens at
//                                positions P - 511 .. P in one call, as a
//                                long prompt's last step runs them
//
// Arguments: position, isa (0 scalar, 1 avx2, 2 avx512; capped to what the
// CPU runs), layers, the cache's dtype kv (0 f32, 1 f16, 2 q8_0), threads.
// Counters: positions/s = the (token, head, position) triples a call
// attends over / time (decode: (P + 1) * heads); kv_GB/s = the K/V bytes
// those triples read (each position's 2 rows) / time.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/attention.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu {
namespace {

constexpr int64_t kHeads = 12;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kBlockSize = 16;

constexpr GgmlType kDtypes[] = {GgmlType::kF32, GgmlType::kF16,
                                GgmlType::kQ8_0};

// n_tokens query tokens of one sequence at positions
// position - n_tokens + 1 .. position.
void RunAttention(benchmark::State& state, int64_t position, int64_t n_tokens,
                  int64_t n_layers, GgmlType dtype, int threads) {
  const int64_t n_blocks = position / kBlockSize + 1;
  KvCacheShape shape{.n_layers = n_layers,
                     .n_kv_heads = kHeads,
                     .head_dim = kHeadDim,
                     .block_size = kBlockSize,
                     .num_blocks = n_blocks,
                     .dtype = dtype};
  auto cache = KvCache::Create(shape);
  if (!cache.ok()) return state.SkipWithError("cache");
  state.SetLabel(absl::AsciiStrToLower(GetGgmlTypeTraits(dtype).name));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> row(kHeadDim);
  for (int64_t l = 0; l < n_layers; ++l) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int64_t w = 0; w < 2; ++w) {
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t slot = 0; slot < kBlockSize; ++slot) {
            for (float& x : row) x = normal(rng);
            (*cache)->WriteRow(l, b, w, h, slot, row.data());
          }
        }
      }
    }
  }
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const std::vector<absl::Span<const int32_t>> tables = {table};
  std::vector<int32_t> positions(n_tokens);
  std::iota(positions.begin(), positions.end(),
            static_cast<int32_t>(position - n_tokens + 1));
  const std::vector<int32_t> token_table(n_tokens, 0);
  std::vector<float> q(n_tokens * kHeads * kHeadDim), out(q.size());
  for (float& x : q) x = normal(rng);
  const AttentionParams params{.n_heads = kHeads,
                               .n_kv_heads = kHeads,
                               .head_dim = kHeadDim,
                               .scale = 1.0f / std::sqrt(float{kHeadDim})};
  ThreadPool pool(threads);
  int64_t layer = 0;
  for (auto _ : state) {
    PagedAttention(**cache, layer, params, q.data(), n_tokens,
                   positions.data(), token_table.data(), tables, out.data(),
                   pool);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % n_layers;
  }
  double triples = 0;  // (token, head, position) per call
  for (const int32_t p : positions) triples += double(p + 1) * kHeads;
  state.counters["positions/s"] = benchmark::Counter(
      triples * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["kv_GB/s"] = benchmark::Counter(
      triples * 2 * double(KvCache::RowBytes(dtype, kHeadDim)) *
          state.iterations() / 1e9,
      benchmark::Counter::kIsRate);
}

void BM_AttentionDecode(benchmark::State& state) {
  const auto isa = static_cast<IsaLevel>(state.range(1));
  if (SetIsaLevelCap(isa) != isa) return state.SkipWithError("isa");
  RunAttention(state, state.range(0), 1, state.range(2),
               kDtypes[state.range(3)], 1);
  SetIsaLevelCap(IsaLevel::kAvx512);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{128, 1024}, {0, 1, 2}, {12, 1}, {0, 1, 2}})
    ->ArgNames({"pos", "isa", "layers", "kv"});

void BM_AttentionLong(benchmark::State& state) {
  RunAttention(state, state.range(0), 1, 12, kDtypes[state.range(1)],
               static_cast<int>(state.range(2)));
}
BENCHMARK(BM_AttentionLong)
    ->ArgsProduct({{1024, 4096, 16384}, {0, 1, 2}, {1, 2}})
    ->ArgNames({"pos", "kv", "threads"})
    ->UseRealTime();

void BM_AttentionPrefill(benchmark::State& state) {
  RunAttention(state, state.range(0), 512, 1, kDtypes[state.range(1)],
               static_cast<int>(state.range(2)));
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgsProduct({{1023, 4095, 16383}, {0, 1, 2}, {1, 2}})
    ->ArgNames({"pos", "kv", "threads"})
    ->UseRealTime();

}  // namespace
}  // namespace paceline::engine::cpu

BENCHMARK_MAIN();
