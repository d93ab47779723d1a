// The CPU engine end to end on random weights of the stories110m shape
// (dummy:stories110m, dim 768, 12 layers, vocab 32000) in F32, F16, Q8_0,
// Q4_0, Q4_K, Q6_K and llama.cpp's Q4_K_M mix (Q4_K with Q6_K for the
// output head and some layers' attn_v / ffn_down). TYPE is an index into
// kRecipes, named in the benchmark's label:
//   BM_Decode/TYPE/B/P  one decode step for B sequences, each at its own
//                       position (64..191) in its own blocks; tokens/s
//                       counts B per step. At B = 1 it also reports the
//                       weight bytes streamed per second (weight_GB/s):
//                       bytes read per token × tokens/s. P: the engine
//                       packs its matrices (the default) or not.
//   BM_Prefill/TYPE/P   one 512-token prompt in one step; tokens/s.
//                       GFLOP/s counts 2 x matmul weights per token plus
//                       attention (4 x heads x head_dim x context per
//                       layer); peak_frac divides it by the ceiling of the
//                       instructions the type's kernels use (bench/
//                       peak_compute.h): the FMA peak for F32 / F16, the
//                       int8 peak for the quantized types.
//   BM_DecodeLarge/B    BM_Decode on dummy:llama-1b F16 (2.5 GB: too big
//                       for any cache, so batch 1 is bound by DRAM).
//   BM_LongContext/KV/C one F16 sequence decoding at C (64, 1k, 4k, 16k)
//                       positions of context in a KV cache of type KV (F32,
//                       F16, Q8_0): tokens/s, and roofline_frac, the bytes
//                       each token reads (weights + the K/V of its context)
//                       per second over the DRAM read rate (1 GiB,
//                       measured in the same program); prefill_tok/s, the
//                       rate its context was prefilled at (512 a step).
//   BM_PeakFma, BM_PeakInt8  those ceilings (GOP/s), measured the same way.
//   BM_ModelDecode, BM_ModelPrefill, BM_ModelDecodeDepth
//                       only when PACELINE_BENCH_MODEL names a model (a GGUF file or a dummy: spec, as
//                       `paceline generate --model`): llama-bench's pp512
//                       and tg128 on it, with its warm-ups (an untimed
//                       step of 32 tokens, of 1). Prefill: 512 tokens at
//                       position 0 in one step; tokens/s. Decode: one
//                       sequence, positions 0..127 in turn (128
//                       iterations), tokens/s, the bytes the engine's
//                       matmuls read per token (CpuEngine::
//                       last_step_weight_bytes, the mean over the timed
//                       steps) and their rate over the DRAM read rate
//                       (1 GiB, measured first in the same program). The
//                       engine's defaults otherwise (F16 KV cache, packed
//                       matrices, one thread per core). DecodeDepth: 32
//                       decode steps after a depth of 0 / 1k / 4k / 16k
//                       prefilled positions (llama-bench -d D -n 32), and
//                       the sequence's KV + recurrent state in MB.
//   BM_ReadBandwidth    a read-only sum (bench/read_bandwidth.h, 4 streams
//                       per thread) of 1 GiB (DRAM: the roofline to divide
//                       weight_GB/s by) and of 256 / 128 MiB (what the
//                       last-level cache may serve) on the engine's
//                       thread count.
// Wall time (UseRealTime): the work runs on the engine's thread pool.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/peak_compute.h"
#include "bench/read_bandwidth.h"
#include "common/status_macros.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/kv_cache.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weight_recipe.h"
#include "engine/model/weights.h"
#include "engine/model_loader.h"

namespace paceline::engine::cpu {
namespace {

constexpr int64_t kContextStart = 64;  // positions prefilled before timing
constexpr int64_t kContextEnd = 192;   // decode wraps back to kContextStart
constexpr int64_t kPrefill = 512;

const WeightRecipe kRecipes[] = {
    WeightRecipe::Uniform(GgmlType::kF32),
    WeightRecipe::Uniform(GgmlType::kF16),
    WeightRecipe::Uniform(GgmlType::kQ8_0),
    WeightRecipe::Uniform(GgmlType::kQ4_0),
    WeightRecipe::Uniform(GgmlType::kQ4_K),
    WeightRecipe::Uniform(GgmlType::kQ6_K),
    WeightRecipe::Mix(WeightMix::kQ4_K_M),
};

// kRecipes[index]'s weights of `shape`, made once per process.
std::shared_ptr<const ModelWeights> Weights(
    int64_t index, benchmark::State& state,
    const char* shape_name = "stories110m") {
  static auto* cache = new std::map<std::pair<std::string, int64_t>,
                                    std::shared_ptr<const ModelWeights>>;
  state.SetLabel(kRecipes[index].name());
  const std::pair<std::string, int64_t> key(shape_name, index);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  auto shape = FindModelShape(shape_name);
  auto w = ModelWeights::Dummy(*shape, kRecipes[index], 0);
  if (!w.ok()) return nullptr;
  std::shared_ptr<const ModelWeights> shared = std::move(*w);
  (*cache)[key] = shared;
  return shared;
}

// The ceilings, measured once per process on a pool of the engine's size.
const bench::Peak& FmaPeak() {
  static const bench::Peak peak = [] {
    ThreadPool pool(0);
    return bench::MeasureFmaPeak(pool);
  }();
  return peak;
}
const bench::Peak& Int8Peak() {
  static const bench::Peak peak = [] {
    ThreadPool pool(0);
    return bench::MeasureInt8Peak(pool);
  }();
  return peak;
}

// The DRAM read rate (bytes/s) long-context decode is divided by.
double DramReadRate() {
  static const double rate = [] {
    ThreadPool pool(0);
    return bench::MeasureReadBandwidth(pool, size_t{1} << 30, 5);
  }();
  return rate;
}

bool IsFloatType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

// Arithmetic of one decoded token of a dense model at `context` positions:
// 2 FLOPs per matmul weight, and q.K plus p.V over the context.
double DecodeFlopsPerToken(const ModelConfig& c, double context) {
  const double q = static_cast<double>(c.n_heads * c.head_dim);
  const double kv = static_cast<double>(c.n_kv_heads * c.head_dim);
  const double d = static_cast<double>(c.n_embd);
  const double per_layer =
      d * q + 2 * d * kv + q * d + 3 * d * static_cast<double>(c.n_ff);
  const double weights = static_cast<double>(c.n_layers) * per_layer +
                         static_cast<double>(c.n_vocab) * d;
  const double attention = 4.0 * static_cast<double>(c.n_layers) * q * context;
  return 2 * weights + attention;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab) {
  std::mt19937 rng(1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

void RunDecode(benchmark::State& state,
               std::shared_ptr<const ModelWeights> weights, GgmlType type,
               int64_t batch, bool packed);

void BM_Decode(benchmark::State& state) {
  auto weights = Weights(state.range(0), state);
  if (weights == nullptr) return state.SkipWithError("weights");
  RunDecode(state, std::move(weights), kRecipes[state.range(0)].base_type(),
            state.range(1), state.range(2) != 0);
}

void BM_DecodeLarge(benchmark::State& state) {
  auto weights = Weights(/*F16*/ 1, state, "llama-1b");
  if (weights == nullptr) return state.SkipWithError("weights");
  RunDecode(state, std::move(weights), GgmlType::kF16, state.range(0), true);
}

void RunDecode(benchmark::State& state,
               std::shared_ptr<const ModelWeights> weights, GgmlType type,
               int64_t batch, bool packed) {
  // Measured before the engine exists: its pool's threads would share the
  // cores with the probe (it read 78 of 129 GFLOP/s beside one).
  const bench::Peak& peak = IsFloatType(type) ? FmaPeak() : Int8Peak();
  const int64_t blocks_per_seq = (kContextEnd + 15) / 16;
  CpuEngineOptions options;
  options.kv_type = GgmlType::kF32;  // the cache these figures always used
  options.pack_weights = packed;
  options.num_blocks = static_cast<int32_t>(batch * blocks_per_seq);
  options.max_tokens_per_step =
      static_cast<int32_t>(std::max<int64_t>(batch, kContextStart));
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const int64_t vocab = weights->config().n_vocab;

  std::vector<std::vector<int32_t>> tables(batch);
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    }
  }
  // Fill every sequence's first kContextStart positions.
  ForwardBatch batch_value;
  for (int64_t s = 0; s < batch; ++s) {
    batch_value.tokens = RandomTokens(kContextStart, vocab);
    batch_value.sequences = {SequenceSlice{.token_begin = 0,
                                           .token_count = kContextStart,
                                           .position_begin = 0,
                                           .block_table = tables[s],
                                           .num_logits = 0}};
    if (!(*engine)->Forward(batch_value, {}).ok()) {
      return state.SkipWithError("prefill");
    }
  }
  batch_value.tokens = RandomTokens(batch, vocab);
  batch_value.sequences.clear();
  for (int64_t s = 0; s < batch; ++s) {
    batch_value.sequences.push_back(
        SequenceSlice{.token_begin = static_cast<int32_t>(s),
                      .token_count = 1,
                      .position_begin = kContextStart,
                      .block_table = tables[s],
                      .num_logits = 1});
  }
  std::vector<float> logits(batch * vocab);
  // One untimed step in each block the timed steps write: the pool's pages
  // fault in on first write (kv_cache.h), which a serving engine pays once
  // per block for its lifetime; here each run of this function has a new
  // engine, so its first step in a block would otherwise pay it (at batch
  // 64, 64 x 12 layers x 24 pages, ~1/3 of a short run's time).
  for (int64_t p = kContextStart; p < kContextEnd; p += 16) {
    for (SequenceSlice& slice : batch_value.sequences) {
      slice.position_begin = static_cast<int32_t>(p);
    }
    if (!(*engine)->Forward(batch_value, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("warm-up");
    }
  }
  int64_t position = kContextStart;
  for (auto _ : state) {
    for (SequenceSlice& slice : batch_value.sequences) {
      slice.position_begin = static_cast<int32_t>(position);
    }
    if (!(*engine)->Forward(batch_value, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
    if (++position == kContextEnd) position = kContextStart;
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(batch * state.iterations()),
                         benchmark::Counter::kIsRate);
  if (batch == 1) {
    state.counters["weight_GB/s"] =
        benchmark::Counter(static_cast<double>(weights->MatMulBytesPerToken()) *
                               state.iterations() / 1e9,
                           benchmark::Counter::kIsRate);
  }
  state.counters["weight_MB/token"] =
      static_cast<double>(weights->MatMulBytesPerToken()) / 1e6;
  // Positions kContextStart .. kContextEnd - 1 in turn: the mean context.
  const double context = (kContextStart + kContextEnd + 1) / 2.0;
  const double flops = DecodeFlopsPerToken(weights->config(), context) *
                       static_cast<double>(batch * state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops / peak.ops_per_s, benchmark::Counter::kIsRate);
}

// Speculative decoding's cost side: one sequence's step of `tokens` tokens
// (its own next token and tokens - 1 drafts) with a logits row for each,
// at the positions decode runs at. Its time over the 1-token step's, in
// one run, is what a draft token costs (scheduler.h: drafts ride only on
// steps of at most speculation_max_step_tokens tokens).
void BM_DraftStep(benchmark::State& state) {
  const char* shape = state.range(2) == 0 ? "stories110m" : "stories15m";
  auto weights = Weights(state.range(0), state, shape);
  if (weights == nullptr) return state.SkipWithError("weights");
  const int32_t tokens = static_cast<int32_t>(state.range(1));
  CpuEngineOptions options;
  options.kv_type = GgmlType::kF32;  // the cache these figures always used
  options.num_blocks = (kContextEnd + 32) / 16;
  options.max_tokens_per_step = kContextStart;
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const int64_t vocab = weights->config().n_vocab;
  std::vector<int32_t> table(options.num_blocks);
  for (int32_t i = 0; i < options.num_blocks; ++i) table[i] = i;
  ForwardBatch batch;
  batch.tokens = RandomTokens(kContextStart, vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = kContextStart,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 0}};
  if (!(*engine)->Forward(batch, {}).ok()) return state.SkipWithError("fill");
  batch.tokens = RandomTokens(tokens, vocab);
  batch.sequences[0].token_count = tokens;
  batch.sequences[0].num_logits = tokens;
  std::vector<float> logits(static_cast<size_t>(tokens * vocab));
  // Every position written once before timing (first-touch page faults).
  for (int64_t p = kContextStart; p + tokens <= kContextEnd + 32; p += tokens) {
    batch.sequences[0].position_begin = static_cast<int32_t>(p);
    if (!(*engine)->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("warm-up");
    }
  }
  int64_t position = kContextStart;
  for (auto _ : state) {
    batch.sequences[0].position_begin = static_cast<int32_t>(position);
    if (!(*engine)->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
    if (++position == kContextEnd) position = kContextStart;
  }
  state.counters["steps/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Decode of one sequence at `context` positions (kLongDecode steps from
// there, then back): each token reads the weights and all the K/V before
// it, so past a few thousand positions the KV cache is most of the bytes.
constexpr int64_t kLongDecode = 64;
constexpr GgmlType kKvTypes[] = {GgmlType::kF32, GgmlType::kF16,
                                 GgmlType::kQ8_0};

// Prefills positions [0, context) of `table` in steps of the engine's limit.
absl::Status FillContext(Engine& engine, int64_t context, int64_t step,
                         int64_t vocab, absl::Span<const int32_t> table) {
  ForwardBatch batch;
  for (int64_t p = 0; p < context; p += step) {
    const int64_t n = std::min(step, context - p);
    batch.tokens = RandomTokens(n, vocab);
    batch.sequences = {SequenceSlice{.token_begin = 0,
                                     .token_count = static_cast<int32_t>(n),
                                     .position_begin = static_cast<int32_t>(p),
                                     .block_table = table,
                                     .num_logits = 0}};
    RETURN_IF_ERROR(engine.Forward(batch, {}));
  }
  return absl::OkStatus();
}

void BM_LongContext(benchmark::State& state) {
  auto weights = Weights(/*F16*/ 1, state);
  if (weights == nullptr) return state.SkipWithError("weights");
  const GgmlType kv_type = kKvTypes[state.range(0)];
  const int64_t context = state.range(1);
  const double dram = DramReadRate();  // before the engine's threads exist
  const ModelConfig& c = weights->config();
  CpuEngineOptions options;
  options.kv_type = kv_type;
  options.num_blocks =
      static_cast<int32_t>((context + kLongDecode + 15) / 16);
  options.max_tokens_per_step = static_cast<int32_t>(kPrefill);
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  std::vector<int32_t> table(options.num_blocks);
  for (int32_t i = 0; i < options.num_blocks; ++i) table[i] = i;
  const auto prefill_start = std::chrono::steady_clock::now();
  if (!FillContext(**engine, context, kPrefill, c.n_vocab, table).ok()) {
    return state.SkipWithError("prefill");
  }
  const std::chrono::duration<double> prefill_time =
      std::chrono::steady_clock::now() - prefill_start;
  ForwardBatch batch;
  batch.tokens = RandomTokens(1, c.n_vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = 1,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  std::vector<float> logits(c.n_vocab);
  const auto step = [&](int64_t position) {
    batch.sequences[0].position_begin = static_cast<int32_t>(position);
    return (*engine)->Forward(batch, absl::MakeSpan(logits)).ok();
  };
  // Every decode position written once before timing (first-touch faults).
  for (int64_t i = 0; i < kLongDecode; ++i) {
    if (!step(context + i)) return state.SkipWithError("warm-up");
  }
  int64_t i = 0;
  for (auto _ : state) {
    if (!step(context + i)) return state.SkipWithError("forward");
    benchmark::DoNotOptimize(logits.data());
    if (++i == kLongDecode) i = 0;
  }
  const double mean_context = static_cast<double>(context) +
                              static_cast<double>(kLongDecode - 1) / 2;
  const double kv_bytes =
      2.0 * static_cast<double>(c.n_layers * c.n_kv_heads) *
      static_cast<double>(KvCache::RowBytes(kv_type, c.head_dim)) *
      mean_context;
  const double bytes =
      static_cast<double>(weights->MatMulBytesPerToken()) + kv_bytes;
  state.SetLabel(absl::StrCat("F16 weights, ", DtypeName(kv_type), " KV"));
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["kv_MB/token"] = kv_bytes / 1e6;
  // The context's prefill, kPrefill tokens a step (untimed by the
  // benchmark itself).
  state.counters["prefill_tok/s"] =
      static_cast<double>(context) / prefill_time.count();
  state.counters["roofline_frac"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / dram,
                         benchmark::Counter::kIsRate);
}

// A ceiling as a benchmark: `measure` on a pool of the engine's size.
void RunPeak(benchmark::State& state, bench::Peak (*measure)(ThreadPool&),
             const char* counter) {
  ThreadPool pool(0);
  bench::Peak peak;
  for (auto _ : state) peak = measure(pool);
  state.SetLabel(peak.instruction);
  state.counters[counter] = peak.ops_per_s / 1e9;
}

void BM_PeakFma(benchmark::State& state) {
  RunPeak(
      state, [](ThreadPool& p) { return bench::MeasureFmaPeak(p); }, "GFLOP/s");
}

void BM_PeakInt8(benchmark::State& state) {
  RunPeak(
      state, [](ThreadPool& p) { return bench::MeasureInt8Peak(p); }, "GOP/s");
}

void BM_Prefill(benchmark::State& state) {
  auto weights = Weights(state.range(0), state);
  if (weights == nullptr) return state.SkipWithError("weights");
  CpuEngineOptions options;
  options.kv_type = GgmlType::kF32;  // the cache these figures always used
  options.pack_weights = state.range(1) != 0;
  options.num_blocks = kPrefill / 16;
  options.max_tokens_per_step = kPrefill;
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  std::vector<int32_t> table(kPrefill / 16);
  for (int32_t i = 0; i < kPrefill / 16; ++i) table[i] = i;
  ForwardBatch batch;
  batch.tokens = RandomTokens(kPrefill, weights->config().n_vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = kPrefill,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  std::vector<float> logits(weights->config().n_vocab);
  for (auto _ : state) {
    if (!(*engine)->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kPrefill * state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_ReadBandwidth(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  ThreadPool pool(0);
  std::vector<uint64_t> partial;
  bench::ReadBuffer(bytes);
  for (auto _ : state) bench::ReadPass(pool, bytes, 4, partial);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}

// PACELINE_BENCH_MODEL's weights, loaded once per process.
std::shared_ptr<const ModelWeights> BenchModel(benchmark::State& state) {
  static const std::shared_ptr<const ModelWeights> weights =
      []() -> std::shared_ptr<const ModelWeights> {
    auto model = OpenModel(std::getenv("PACELINE_BENCH_MODEL"));
    if (!model.ok()) {
      fprintf(stderr, "%s\n", model.status().ToString().c_str());
      return nullptr;
    }
    return model->weights;
  }();
  state.SetLabel(std::getenv("PACELINE_BENCH_MODEL"));
  return weights;
}

// A table of the blocks 0 .. n - 1.
std::vector<int32_t> Blocks(int64_t n) {
  std::vector<int32_t> table(n);
  for (int32_t i = 0; i < n; ++i) table[i] = i;
  return table;
}

constexpr int64_t kTg = 128;          // llama-bench's tg128
constexpr int32_t kWarmUpTokens = 32;  // its prompt warm-up

// A hybrid model's sequence needs a recurrent-state slot; others none.
int32_t StateSlot(const Engine& engine) {
  return engine.num_state_slots() > 0 ? 0 : -1;
}

void BM_ModelDecode(benchmark::State& state) {
  auto weights = BenchModel(state);
  if (weights == nullptr) return state.SkipWithError("model");
  const double dram = DramReadRate();  // before the engine's threads exist
  CpuEngineOptions options;
  options.num_blocks = kTg / 16;
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const int64_t vocab = weights->config().n_vocab;
  const std::vector<int32_t> table = Blocks(options.num_blocks);
  ForwardBatch batch;
  batch.tokens = RandomTokens(1, vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = 1,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  batch.sequences[0].state_slot = StateSlot(**engine);
  std::vector<float> logits(vocab);
  const auto step = [&](int64_t position) {
    batch.sequences[0].position_begin = static_cast<int32_t>(position);
    return (*engine)->Forward(batch, absl::MakeSpan(logits)).ok();
  };
  if (!step(0)) return state.SkipWithError("warm-up");
  int64_t position = 0;
  double bytes = 0;
  for (auto _ : state) {
    if (!step(position)) return state.SkipWithError("forward");
    benchmark::DoNotOptimize(logits.data());
    bytes += static_cast<double>((*engine)->last_step_weight_bytes());
    if (++position == kTg) position = 0;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(n, benchmark::Counter::kIsRate);
  state.counters["weight_MB/token"] = bytes / n / 1e6;
  state.counters["matmul_MB/token"] =
      static_cast<double>(weights->MatMulBytesPerToken()) / 1e6;
  state.counters["weight_GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["dram_GB/s"] = dram / 1e9;
  state.counters["roofline_frac"] =
      benchmark::Counter(bytes / dram, benchmark::Counter::kIsRate);
}

void BM_ModelPrefill(benchmark::State& state) {
  auto weights = BenchModel(state);
  if (weights == nullptr) return state.SkipWithError("model");
  CpuEngineOptions options;
  options.num_blocks = kPrefill / 16;
  options.max_tokens_per_step = kPrefill;
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const std::vector<int32_t> table = Blocks(options.num_blocks);
  ForwardBatch batch;
  batch.tokens = RandomTokens(kPrefill, weights->config().n_vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = kPrefill,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  batch.sequences[0].state_slot = StateSlot(**engine);
  std::vector<float> logits(weights->config().n_vocab);
  ForwardBatch warm_up = batch;
  warm_up.tokens.resize(kWarmUpTokens);
  warm_up.sequences[0].token_count = kWarmUpTokens;
  if (!(*engine)->Forward(warm_up, absl::MakeSpan(logits)).ok()) {
    return state.SkipWithError("warm-up");
  }
  for (auto _ : state) {
    if (!(*engine)->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kPrefill * state.iterations()),
                         benchmark::Counter::kIsRate);
}

// Decode at depth: one sequence whose first state.range(0) positions were
// prefilled (512 a step, outside the timing), then decode steps at the
// positions after them (llama-bench -d DEPTH -n 32). What context costs a
// decode step: a dense model reads every layer's KV up to the depth, a
// hybrid only its attention layers'. kv_state_MB: the sequence's KV at
// that depth plus its recurrent state.
constexpr int64_t kDepthTg = 32;

void BM_ModelDecodeDepth(benchmark::State& state) {
  auto weights = BenchModel(state);
  if (weights == nullptr) return state.SkipWithError("model");
  const int64_t depth = state.range(0);
  const ModelConfig& c = weights->config();
  CpuEngineOptions options;
  options.max_tokens_per_step = 512;
  options.num_blocks = static_cast<int32_t>((depth + kDepthTg) / 16 + 1);
  auto engine = CpuEngine::Create(weights, options);
  if (!engine.ok()) return state.SkipWithError("engine");
  const std::vector<int32_t> table = Blocks(options.num_blocks);
  std::vector<float> logits(c.n_vocab);
  ForwardBatch batch;
  batch.sequences = {SequenceSlice{.block_table = table}};
  SequenceSlice& slice = batch.sequences[0];
  slice.state_slot = StateSlot(**engine);
  for (int64_t p = 0; p < depth; p += 512) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(512, depth - p));
    batch.tokens = RandomTokens(n, c.n_vocab);
    slice.token_count = n;
    slice.position_begin = static_cast<int32_t>(p);
    slice.num_logits = 0;
    if (!(*engine)->Forward(batch, {}).ok()) {
      return state.SkipWithError("prefill");
    }
  }
  batch.tokens = RandomTokens(1, c.n_vocab);
  slice.token_count = 1;
  slice.num_logits = 1;
  int64_t i = 0;
  for (auto _ : state) {
    slice.position_begin = static_cast<int32_t>(depth + i);
    if (!(*engine)->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
    if (++i == kDepthTg) i = 0;
  }
  const int64_t kv_layers = c.n_layers - c.NumRecurrentLayers();
  const double kv_bytes = 2.0 * static_cast<double>(kv_layers) *
                          static_cast<double>(c.n_kv_heads * c.head_dim) *
                          2 /* F16 */ * static_cast<double>(depth + kDepthTg);
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["kv_state_MB"] =
      (kv_bytes + static_cast<double>(c.RecurrentStateBytes())) / 1e6;
}

// Registered only when a model is named: the default run is unchanged.
[[maybe_unused]] const bool kModelBenchmarks = [] {
  if (std::getenv("PACELINE_BENCH_MODEL") == nullptr) return false;
  benchmark::RegisterBenchmark("BM_ModelPrefill", BM_ModelPrefill)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_ModelDecode", BM_ModelDecode)
      ->Iterations(kTg)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_ModelDecodeDepth", BM_ModelDecodeDepth)
      ->ArgName("depth")
      ->Arg(0)
      ->Arg(1024)
      ->Arg(4096)
      ->Arg(16384)
      ->Iterations(kDepthTg)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return true;
}();

// packed: the engine's default (CpuEngineOptions::pack_weights), and for
// the types it packs on this CPU also without, for an A/B in one run.
void DecodeArgs(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < std::ssize(kRecipes); ++i) {
    const GgmlType t = kRecipes[i].base_type();
    for (int64_t batch : {1, 8, 16, 32, 64}) {
      b->Args({i, batch, 1});
      if (MatMulPrefersPanels(t, 768)) b->Args({i, batch, 0});
    }
  }
  b->ArgNames({"type", "batch", "packed"});
}

void PrefillArgs(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < std::ssize(kRecipes); ++i) {
    b->Args({i, 1});
    if (MatMulPrefersPanels(kRecipes[i].base_type(), 768)) b->Args({i, 0});
  }
  b->ArgNames({"type", "packed"});
}

// 1 GiB: DRAM. 128 and 256 MiB: the sizes of the quantized and F16 110M
// models, which this VM's last-level cache (lscpu: 480 MiB) may hold
// between decode steps.
BENCHMARK(BM_ReadBandwidth)
    ->ArgName("MiB")
    ->Arg(1024)
    ->Arg(256)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PeakFma)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PeakInt8)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)
    ->Apply(DecodeArgs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DecodeLarge)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DraftStep)
    ->ArgsProduct({{1, 2, 3}, {1, 2, 3, 5, 9, 17}, {0, 1}})
    ->ArgNames({"type", "tokens", "small"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LongContext)
    ->ArgsProduct({{0, 1, 2}, {64, 1024, 4096, 16384}})
    ->ArgNames({"kv", "context"})
    ->Iterations(kLongDecode)  // one run: the prefill is not repeated
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Prefill)
    ->Apply(PrefillArgs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace paceline::engine::cpu

BENCHMARK_MAIN();
