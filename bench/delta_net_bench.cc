// The gated delta rule of one value head over a prefill slice of n tokens
// (engine/cpu/delta_net.h), on one thread: the token-by-token scan in
// ggml's order (DeltaNetHead) and in 16 lanes (DeltaNetHeadLanes, what
// the engine runs). Inputs are random, the state carried from one
// iteration to the next (its decay keeps it bounded). The chunked form
// measured beside them in bench/RESULTS.md was removed after that
// measurement (it is in the history at commit 7acee92).
//
//   BM_DeltaNet/d/n/lanes   lanes = 0: ggml's order; 1: 16 lanes
//
// Counter: tokens/s = n / time, for one head (a layer runs v_heads of them
// per slice, one per thread-pool task).

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/cpu/delta_net.h"

namespace paceline::engine::cpu {
namespace {

void BM_DeltaNet(benchmark::State& state) {
  const int64_t d = state.range(0);
  const int64_t n = state.range(1);
  const bool lanes = state.range(2) != 0;
  DeltaNetShape shape;
  shape.conv_kernel = 4;
  shape.k_heads = 1;
  shape.v_heads = 1;
  shape.head_dim = d;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](int64_t size, float mean, float std) {
    std::vector<float> v(static_cast<size_t>(size));
    for (float& x : v) x = mean + std * normal(rng);
    return v;
  };
  const std::vector<float> conv = random(n * shape.conv_dim(), 0.0f, 1.0f);
  const std::vector<float> ba = random(n * 2, 0.0f, 1.0f);
  const std::vector<float> z = random(n * d, 0.0f, 1.0f);
  const std::vector<float> norm = random(d, 1.0f, 0.1f);
  const float ssm_a = -0.5f;
  const float dt_bias = -1.0f;
  std::vector<float> head_state = random(d * d, 0.0f, 0.3f);
  std::vector<float> out(static_cast<size_t>(n * d));
  DeltaNetHeadArgs args;
  args.conv = conv.data();
  args.b = ba.data();
  args.a = ba.data() + 1;
  args.ba_stride = 2;
  args.z = z.data();
  args.ssm_a = &ssm_a;
  args.dt_bias = &dt_bias;
  args.norm = norm.data();
  for (auto _ : state) {
    if (lanes) {
      DeltaNetHeadLanes(shape, args, 0, n, head_state.data(), out.data());
    } else {
      DeltaNetHead(shape, args, 0, n, head_state.data(), out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t d : {64, 128}) {
    for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 256, 1024, 4096}) {
      for (int64_t lanes : {0, 1}) b->Args({d, n, lanes});
    }
  }
}
BENCHMARK(BM_DeltaNet)->Apply(Args)->ArgNames({"d", "n", "lanes"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace paceline::engine::cpu

BENCHMARK_MAIN();
