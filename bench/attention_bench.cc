// CPU paged attention for decode: one query token of one sequence at
// position P, stories110m's heads (12 query and KV heads, head_dim 64),
// blocks of 16 positions scattered over the pool, on one thread.
//
//   BM_AttentionDecode/P/isa/L   one PagedAttention call; each iteration
//                                reads the next of L layers: with 12, as
//                                decode does (K/V mostly from L3), with 1
//                                the kernel alone (K/V from L1/L2)
//
// Arguments: position, isa (0 scalar, 1 avx2, 2 avx512; capped to what the
// CPU runs), layers. Counters: positions/s = (P + 1) * heads / time.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/attention.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/thread_pool.h"

namespace paceline::engine::cpu {
namespace {

constexpr int64_t kHeads = 12;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kBlockSize = 16;

void BM_AttentionDecode(benchmark::State& state) {
  const int64_t position = state.range(0);
  const auto isa = static_cast<IsaLevel>(state.range(1));
  const int64_t n_layers = state.range(2);
  if (SetIsaLevelCap(isa) != isa) return state.SkipWithError("isa");
  const int64_t n_blocks = position / kBlockSize + 1;
  KvCacheShape shape{.n_layers = n_layers,
                     .n_kv_heads = kHeads,
                     .head_dim = kHeadDim,
                     .block_size = kBlockSize,
                     .num_blocks = n_blocks};
  auto cache = KvCache::Create(shape);
  if (!cache.ok()) return state.SkipWithError("cache");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int64_t l = 0; l < n_layers; ++l) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int64_t w = 0; w < 2; ++w) {
        for (int64_t h = 0; h < kHeads; ++h) {
          float* rows = (*cache)->Rows(l, b, w, h);
          for (int64_t i = 0; i < kBlockSize * kHeadDim; ++i) {
            rows[i] = normal(rng);
          }
        }
      }
    }
  }
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const std::vector<absl::Span<const int32_t>> tables = {table};
  const int32_t pos = static_cast<int32_t>(position);
  const int32_t token_table = 0;
  std::vector<float> q(kHeads * kHeadDim), out(kHeads * kHeadDim);
  for (float& x : q) x = normal(rng);
  const AttentionParams params{.n_heads = kHeads,
                               .n_kv_heads = kHeads,
                               .head_dim = kHeadDim,
                               .scale = 1.0f / std::sqrt(float{kHeadDim})};
  ThreadPool pool(1);
  int64_t layer = 0;
  for (auto _ : state) {
    PagedAttention(**cache, layer, params, q.data(), 1, &pos, &token_table,
                   tables, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % n_layers;
  }
  state.counters["positions/s"] =
      benchmark::Counter(double(position + 1) * kHeads * state.iterations(),
                         benchmark::Counter::kIsRate);
  SetIsaLevelCap(IsaLevel::kAvx512);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{128, 1024}, {0, 1, 2}, {12, 1}})
    ->ArgNames({"pos", "isa", "layers"});

}  // namespace
}  // namespace paceline::engine::cpu

BENCHMARK_MAIN();
