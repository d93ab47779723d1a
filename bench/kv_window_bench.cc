// KV bytes one sequence holds with and without sliding-window release
// (issue 37), on Gemma 3 4B's shape (google/gemma-3-4b-it config.json,
// text_config: 34 layers, every 6th global, window 1,024, 4 KV heads x 256,
// F16 cache, 16-token blocks). Each iteration runs one sequence through
// the real pager (kvpager/kv_pager.h) as the scheduler drives it: the
// prompt (context - 128 tokens) in 512-token chunks (Allocate / Cover,
// MarkComputed), then 128 decode steps (MarkComputed, Append). Counters:
// the blocks and bytes the lease holds at the end (a decoding sequence at
// `context` positions), the peak during the prefill chunks, and the
// memory planner's figure (PlanMemory, what `paceline plan` prints).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/kv_layout.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"
#include "kvpager/kv_pager.h"

namespace paceline {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kChunk = 512;   // the engine's step (max_tokens_per_step)
constexpr int32_t kDecode = 128;  // decode steps at the end

engine::ModelConfig Gemma3_4b() {
  engine::ModelConfig c;
  c.architecture = "gemma3";
  c.n_layers = 34;
  c.n_embd = 2560;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.head_dim = 256;
  c.n_ff = 10240;
  c.n_vocab = 262144;
  c.context_length = 131072;
  c.tied_output = true;
  c.sliding_window = 1024;
  c.swa_period = 6;
  return c;
}

// Args: context, release (0 / 1).
void BM_KvBytesPerSequence(benchmark::State& state) {
  const int32_t context = static_cast<int32_t>(state.range(0));
  const bool release = state.range(1) != 0;
  const engine::ModelConfig c = Gemma3_4b();
  const engine::KvLayout layout = engine::PlanKvLayout(c, release);
  // F16: 2 bytes per element, K and V, per slot.
  const uint64_t block_bytes =
      2ull * 2 * layout.slots * c.n_kv_heads * c.head_dim * kBlockSize;
  const int32_t num_blocks = static_cast<int32_t>(
      engine::BlocksToHold(layout, kBlockSize, context, kChunk));
  std::vector<int32_t> tokens(context);
  for (int32_t i = 0; i < context; ++i) tokens[i] = (i * 7919) % 262144;
  const int32_t prompt = context - kDecode;
  int64_t held = 0, peak = 0;
  for (auto _ : state) {
    auto pager = std::move(*kvpager::KvPager::Create(
        num_blocks, kBlockSize, layout.Windows()));
    kvpager::BlockLease lease = std::move(*pager->Allocate(
        absl::MakeConstSpan(tokens).first(prompt), "bench", kChunk));
    peak = 0;
    for (int32_t done = 0; done < prompt;) {
      const int32_t end = std::min(prompt, done + kChunk);
      if (!pager->Cover(&lease, end).ok()) state.SkipWithError("cover");
      peak = std::max<int64_t>(peak, lease.num_blocks());
      (void)pager->MarkComputed(&lease, end);
      done = end;
    }
    std::vector<kvpager::BlockCopy> copies;
    for (int32_t p = prompt; p < context; ++p) {
      if (!pager->Append(&lease, {tokens[p]}, &copies).ok()) {
        state.SkipWithError("append");
      }
      peak = std::max<int64_t>(peak, lease.num_blocks());
      (void)pager->MarkComputed(&lease, p + 1);
    }
    held = lease.num_blocks();
  }
  engine::MemoryPlanRequest request;
  request.weights_recipe =
      engine::WeightRecipe::Uniform(engine::GgmlType::kF16);
  request.context = context;
  request.sequences = 1;
  request.window_release = release;
  const absl::StatusOr<engine::MemoryPlan> plan =
      engine::PlanMemory(c, request);
  state.counters["groups"] = layout.num_groups();
  state.counters["blocks_held"] = static_cast<double>(held);
  state.counters["MiB_held"] =
      static_cast<double>(held * block_bytes) / (1 << 20);
  state.counters["MiB_peak"] =
      static_cast<double>(peak * block_bytes) / (1 << 20);
  state.counters["MiB_plan"] =
      plan.ok() ? static_cast<double>(plan->kv_bytes_per_sequence) / (1 << 20)
                : -1;
}
BENCHMARK(BM_KvBytesPerSequence)
    ->ArgsProduct({{4096, 32768}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace paceline

BENCHMARK_MAIN();
