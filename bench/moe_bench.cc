// The CPU engine on the mixture-of-experts benchmark shape
// (dummy:stories110m-moe: stories110m's layers with 8 experts of its FFN
// width, 2 used per token) in Q8_0:
//   BM_MoeDecode/B  one decode step for B sequences, each at its own
//                   position (64..191) in its own blocks. tokens/s counts
//                   B per step; weight_MB/step is what the step's matmuls
//                   read (CpuEngine::last_step_weight_bytes: each selected
//                   expert once, however many of the B tokens chose it),
//                   next to weight_MB/token (one token's active weights)
//                   and experts/layer (the experts a step runs, of 8).
// Wall time (UseRealTime): the work runs on the engine's thread pool.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weights.h"

namespace paceline::engine::cpu {
namespace {

constexpr int64_t kContextStart = 64;
constexpr int64_t kContextEnd = 192;

std::shared_ptr<const ModelWeights> Weights() {
  static auto* shared = [] {
    auto shape = FindModelShape("stories110m-moe");
    auto w = ModelWeights::Dummy(*shape, GgmlType::kQ8_0, 0);
    return w.ok() ? new std::shared_ptr<const ModelWeights>(std::move(*w))
                  : new std::shared_ptr<const ModelWeights>();
  }();
  return *shared;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

void BM_MoeDecode(benchmark::State& state) {
  const int64_t batch = state.range(0);
  auto weights = Weights();
  if (weights == nullptr) return state.SkipWithError("weights");
  const int64_t blocks_per_seq = (kContextEnd + 15) / 16;
  CpuEngineOptions options;
  options.kv_type = GgmlType::kF32;  // the cache these figures always used
  options.num_blocks = static_cast<int32_t>(batch * blocks_per_seq);
  options.max_tokens_per_step =
      static_cast<int32_t>(std::max<int64_t>(batch, kContextStart));
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const int64_t vocab = weights->config().n_vocab;
  std::vector<std::vector<int32_t>> tables(batch);
  ForwardBatch step;
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    }
    step.tokens = RandomTokens(kContextStart, vocab, static_cast<uint32_t>(s));
    step.sequences = {SequenceSlice{.token_begin = 0,
                                    .token_count = kContextStart,
                                    .position_begin = 0,
                                    .block_table = tables[s],
                                    .num_logits = 0}};
    if (!(*engine)->Forward(step, {}).ok()) {
      return state.SkipWithError("prefill");
    }
  }
  step.sequences.clear();
  for (int64_t s = 0; s < batch; ++s) {
    step.sequences.push_back(
        SequenceSlice{.token_begin = static_cast<int32_t>(s),
                      .token_count = 1,
                      .position_begin = kContextStart,
                      .block_table = tables[s],
                      .num_logits = 1});
  }
  std::vector<float> logits(batch * vocab);
  int64_t position = kContextStart;
  double step_bytes = 0;
  uint32_t seed = 100;
  for (auto _ : state) {
    step.tokens = RandomTokens(batch, vocab, seed++);  // routing varies
    for (SequenceSlice& slice : step.sequences) {
      slice.position_begin = static_cast<int32_t>(position);
    }
    if (!(*engine)->Forward(step, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
    step_bytes += static_cast<double>((*engine)->last_step_weight_bytes());
    if (++position == kContextEnd) position = kContextStart;
  }
  const double steps = static_cast<double>(state.iterations());
  const ModelConfig& c = weights->config();
  const double expert_bytes = static_cast<double>(weights->ExpertBytes(0));
  const double other_bytes = static_cast<double>(weights->MatMulBytes()) -
                             c.n_layers * c.n_expert * expert_bytes;
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(batch) * steps, benchmark::Counter::kIsRate);
  state.counters["weight_MB/step"] = step_bytes / steps / 1e6;
  state.counters["weight_MB/token"] =
      static_cast<double>(weights->MatMulBytesPerToken()) / 1e6;
  state.counters["experts/layer"] =
      (step_bytes / steps - other_bytes) / expert_bytes / c.n_layers;
  state.counters["weight_GB/s"] =
      benchmark::Counter(step_bytes / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MoeDecode)
    ->ArgName("B")
    ->Arg(1)
    ->Arg(8)
    ->Arg(32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace paceline::engine::cpu

BENCHMARK_MAIN();
