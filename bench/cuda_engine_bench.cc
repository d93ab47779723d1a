// The CUDA engine end to end on random F16 weights of dummy:llama-1b and
// dummy:llama-3-8b:
//   BM_CudaDecode/MODEL/B/S one decode step for B sequences, each at its own
//                           position (kContext..) in its own blocks;
//                           tokens/s counts B per step. S = 0: the logits
//                           come back to the host (to sample there); S = 1:
//                           ForwardAndSample samples every row on the
//                           device (T 0.8, top-p 0.95) and only token ids
//                           come back.
//   BM_CudaPrefill/MODEL    one 2,048-token prompt in one step; tokens/s.
// Beside each: the HBM roofline, tokens/s if the step only streamed its
// bytes (every weight once, plus each sequence's K/V) at the device's
// measured copy bandwidth (HBM_GB/s: a 2 GiB device-to-device cudaMemcpy,
// read + write bytes over time), and the fraction of it reached.
// Without a CUDA device every benchmark reports "no CUDA device" and
// returns.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weights.h"
#include "engine/sampling/row_sampling.h"

namespace paceline::engine::cuda {
namespace {

constexpr int64_t kContext = 256;     // positions prefilled before timing
constexpr int64_t kDecodeSpan = 128;  // decode wraps back to kContext
constexpr int64_t kPrefill = 2048;
constexpr int64_t kMaxBatch = 256;
constexpr int32_t kBlockSize = 16;
const char* const kModels[] = {"llama-1b", "llama-3-8b"};

bool HaveDevice() {
  static const bool have = [] {
    auto devices = ListCudaDevices();
    return devices.ok() && !devices->empty();
  }();
  return have;
}

// Device copy bandwidth in bytes/s (0 on failure).
double CopyBandwidth() {
  static const double bw = [] {
    constexpr size_t kBytes = size_t{2} << 30;
    void* a = nullptr;
    void* b = nullptr;
    if (cudaMalloc(&a, kBytes) != cudaSuccess) return 0.0;
    if (cudaMalloc(&b, kBytes) != cudaSuccess) {
      cudaFree(a);
      return 0.0;
    }
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaMemcpy(b, a, kBytes, cudaMemcpyDeviceToDevice);  // warm-up
    constexpr int kReps = 10;
    cudaEventRecord(start);
    for (int i = 0; i < kReps; ++i) {
      cudaMemcpy(b, a, kBytes, cudaMemcpyDeviceToDevice);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(a);
    cudaFree(b);
    return ms > 0 ? 2.0 * kBytes * kReps / (ms / 1e3) : 0.0;
  }();
  return bw;
}

struct Loaded {
  std::shared_ptr<const ModelWeights> weights;
  std::unique_ptr<CudaEngine> engine;
};

// One engine per model, kept for the whole run (an 8B upload is slow); the
// other model's engine is dropped first so only one holds device memory.
CudaEngine* Engine(int model) {
  static auto* cache = new std::map<int, Loaded>;
  auto it = cache->find(model);
  if (it != cache->end()) return it->second.engine.get();
  cache->clear();
  auto shape = FindModelShape(kModels[model]);
  if (!shape.ok()) return nullptr;
  auto w = ModelWeights::Dummy(*shape, GgmlType::kF16, 0);
  if (!w.ok()) return nullptr;
  Loaded loaded;
  loaded.weights = std::move(*w);
  CudaEngineOptions options;
  options.block_size = kBlockSize;
  options.num_blocks = static_cast<int32_t>(
      kMaxBatch * ((kContext + kDecodeSpan + kBlockSize - 1) / kBlockSize) +
      kPrefill / kBlockSize);
  options.max_tokens_per_step = kPrefill;
  auto engine = CudaEngine::Create(loaded.weights, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "cuda engine: %s\n",
                 std::string(engine.status().message()).c_str());
    return nullptr;
  }
  loaded.engine = std::move(*engine);
  CudaEngine* e = loaded.engine.get();
  (*cache)[model] = std::move(loaded);
  return e;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab) {
  std::mt19937 rng(1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// K and V bytes of one token over all layers.
double KvBytesPerToken(const CudaEngine& e) {
  const ModelConfig& c = e.config();
  return 2.0 * c.n_layers * c.n_kv_heads * c.head_dim *
         GgmlBlockBytes(e.dtype());
}

void SetRoofline(benchmark::State& state, double tokens_per_step,
                 double bytes_per_step, double tokens) {
  const double bw = CopyBandwidth();
  const double roofline = bw > 0 ? tokens_per_step * bw / bytes_per_step : 0;
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["HBM_GB/s"] = bw / 1e9;
  state.counters["roofline_tok/s"] = roofline;
  state.counters["MB/step"] = bytes_per_step / 1e6;
}

void BM_CudaDecode(benchmark::State& state, int model) {
  if (!HaveDevice()) return state.SkipWithError("no CUDA device");
  const int64_t batch = state.range(0);
  CudaEngine* engine = Engine(model);
  if (engine == nullptr) return state.SkipWithError("engine");
  const int64_t vocab = engine->config().n_vocab;
  const int64_t blocks_per_seq =
      (kContext + kDecodeSpan + kBlockSize - 1) / kBlockSize;
  std::vector<std::vector<int32_t>> tables(batch);
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    }
  }
  // Fill every sequence's first kContext positions, 8 sequences a step.
  ForwardBatch fill;
  for (int64_t s = 0; s < batch; ++s) {
    const int32_t begin = fill.num_tokens();
    const std::vector<int32_t> tokens = RandomTokens(kContext, vocab);
    fill.tokens.insert(fill.tokens.end(), tokens.begin(), tokens.end());
    fill.sequences.push_back(SequenceSlice{.token_begin = begin,
                                           .token_count = kContext,
                                           .position_begin = 0,
                                           .block_table = tables[s],
                                           .num_logits = 0});
    if (fill.num_tokens() + kContext > kPrefill || s + 1 == batch) {
      if (!engine->Forward(fill, {}).ok()) return state.SkipWithError("fill");
      fill = ForwardBatch();
    }
  }
  ForwardBatch step;
  step.tokens = RandomTokens(batch, vocab);
  for (int64_t s = 0; s < batch; ++s) {
    step.sequences.push_back(
        SequenceSlice{.token_begin = static_cast<int32_t>(s),
                      .token_count = 1,
                      .position_begin = kContext,
                      .block_table = tables[s],
                      .num_logits = 1});
  }
  std::vector<float> logits(batch * vocab);
  // gpu_sampling:1 — every row sampled on the device (a chat request's
  // parameters), only token ids copied back.
  const bool sample = state.range(1) != 0;
  std::vector<RowSampling> sampling(batch);
  for (int64_t s = 0; s < batch; ++s) {
    sampling[s].in_engine = true;
    sampling[s].temperature = 0.8f;
    sampling[s].top_p = 0.95f;
    sampling[s].uniform = (s + 0.5) / batch;
  }
  std::vector<int32_t> sampled(batch);
  int64_t position = kContext;
  for (auto _ : state) {
    for (SequenceSlice& slice : step.sequences) {
      slice.position_begin = static_cast<int32_t>(position);
    }
    const absl::Status status =
        sample
            ? engine->ForwardAndSample(step, sampling, absl::MakeSpan(sampled),
                                       absl::MakeSpan(logits))
            : engine->Forward(step, absl::MakeSpan(logits));
    if (!status.ok()) return state.SkipWithError("forward");
    benchmark::DoNotOptimize(logits.data());
    if (++position == kContext + kDecodeSpan) position = kContext;
  }
  const double avg_context = kContext + kDecodeSpan / 2.0;
  SetRoofline(state, static_cast<double>(batch),
              static_cast<double>(engine->MatMulBytesPerToken()) +
                  batch * avg_context * KvBytesPerToken(*engine),
              static_cast<double>(batch * state.iterations()));
}

void BM_CudaPrefill(benchmark::State& state, int model) {
  if (!HaveDevice()) return state.SkipWithError("no CUDA device");
  CudaEngine* engine = Engine(model);
  if (engine == nullptr) return state.SkipWithError("engine");
  // The blocks after the decode benchmark's.
  const int32_t first = engine->num_blocks() - kPrefill / kBlockSize;
  std::vector<int32_t> table(kPrefill / kBlockSize);
  for (int32_t i = 0; i < kPrefill / kBlockSize; ++i) table[i] = first + i;
  ForwardBatch batch;
  batch.tokens = RandomTokens(kPrefill, engine->config().n_vocab);
  batch.sequences = {SequenceSlice{.token_begin = 0,
                                   .token_count = kPrefill,
                                   .position_begin = 0,
                                   .block_table = table,
                                   .num_logits = 1}};
  std::vector<float> logits(engine->config().n_vocab);
  for (auto _ : state) {
    if (!engine->Forward(batch, absl::MakeSpan(logits)).ok()) {
      return state.SkipWithError("forward");
    }
    benchmark::DoNotOptimize(logits.data());
  }
  SetRoofline(state, static_cast<double>(kPrefill),
              static_cast<double>(engine->MatMulBytesPerToken()) +
                  kPrefill * KvBytesPerToken(*engine),
              static_cast<double>(kPrefill * state.iterations()));
}

// Model by model (decode, then prefill), so each model is generated and
// uploaded once.
void Register() {
  for (int model = 0; model < 2; ++model) {
    const std::string name = kModels[model];
    benchmark::RegisterBenchmark(
        ("BM_CudaDecode/" + name).c_str(),
        [model](benchmark::State& state) { BM_CudaDecode(state, model); })
        ->ArgsProduct({{1, 8, 64, 256}, {0, 1}})
        ->ArgNames({"batch", "gpu_sampling"})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
    benchmark::RegisterBenchmark(
        ("BM_CudaPrefill/" + name + "/tokens:2048").c_str(),
        [model](benchmark::State& state) { BM_CudaPrefill(state, model); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
}

}  // namespace
}  // namespace paceline::engine::cuda

int main(int argc, char** argv) {
  paceline::engine::cuda::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
