// Scheduler overhead per engine step: Schedule + Sample + Update (planning,
// block growth, MarkComputed, greedy sampling, stop checks, detokenization,
// the sink handoff) with N sequences running, over the fake engine, whose
// Forward is not timed. Steady state of continuous batching: every
// sequence decodes one token a step; a finished one is replaced before the
// next step (its prefill then rides along in that step). Results go to
// bench/RESULTS.md.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/byte_level.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "scheduler/step.h"
#include "scheduler/step_sampler.h"
#include "scheduler/token_sink.h"
#include "tests/testing/fake_engine.h"

namespace paceline::scheduler {
namespace {

constexpr int32_t kVocab = 512;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kPromptTokens = 32;
constexpr int32_t kMinGenerated = 128;  // requests generate 128..383 tokens

// A handoff as cheap as the server's should be: count and return.
class CountingSink final : public TokenSink {
 public:
  void OnAccepted(const AcceptInfo&) override {}
  void OnTokens(const TokenDelta& delta) override {
    tokens_.fetch_add(static_cast<int64_t>(delta.ids.size()),
                      std::memory_order_relaxed);
  }
  void OnFinished(const FinishInfo&) override {}

 private:
  std::atomic<int64_t> tokens_{0};
};

void BM_ScheduleUpdate(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  const bool stop_strings = state.range(1) != 0;
  testing::FakeEngineOptions eo;
  eo.n_vocab = kVocab;
  eo.block_size = kBlockSize;
  eo.num_blocks = n * ((kPromptTokens + kMinGenerated + 256) / kBlockSize + 2);
  eo.max_tokens_per_step = 8192;
  eo.record = false;
  eo.script = [](absl::Span<const int32_t> context) {
    return static_cast<int32_t>('a' + context.size() % 26);
  };
  testing::FakeEngine engine(eo);
  auto tokenizer = std::move(*engine::MakeByteLevelTokenizer(kVocab));
  SchedulerOptions options;
  options.max_running = n;
  options.tenants = {TenantConfig{"bench", 1.0, 0, 0, 0}};
  auto scheduler = std::move(*Scheduler::Create(
      options, engine, tokenizer.get(), SystemClock::Get()));
  StepSampler sampler(engine, EngineSampling::kAuto);  // the host
  auto sink = std::make_shared<CountingSink>();

  RequestId next_id = 1;
  auto submit = [&] {
    RequestSpec spec;
    spec.tenant = "bench";
    spec.prompt.resize(kPromptTokens);
    for (int32_t i = 0; i < kPromptTokens; ++i) {
      spec.prompt[i] = static_cast<int32_t>((next_id * 7 + i) % 256);
    }
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = kMinGenerated + static_cast<int32_t>(next_id % 256);
    if (stop_strings) spec.stop.stop_strings = {"never!", "zz top"};
    spec.sink = sink;
    (void)scheduler->Submit(next_id++, std::move(spec));
  };
  std::vector<float> logits;
  auto forward = [&](const StepPlan& plan) {
    logits.resize(static_cast<size_t>(plan.num_logit_rows) * kVocab);
    (void)engine.Forward(plan.batch, absl::MakeSpan(logits));
  };
  // The sampling stage and Update (timed together as "update").
  auto update = [&](const StepPlan& plan) {
    scheduler->Update(
        sampler.Sample(plan, EngineOutput{absl::MakeConstSpan(logits), {}}));
  };
  for (int32_t i = 0; i < n; ++i) submit();
  // Warm up past the first prefill and the first wave of finishes.
  for (int step = 0; step < kMinGenerated + 300; ++step) {
    const StepPlan& plan = scheduler->Schedule();
    forward(plan);
    update(plan);
    while (scheduler->num_running() + scheduler->num_waiting() < n) submit();
  }

  using Clock = std::chrono::steady_clock;
  int64_t tokens = 0;
  int64_t sequences = 0;
  double schedule_s = 0;
  double update_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const StepPlan& plan = scheduler->Schedule();
    const auto t1 = Clock::now();
    forward(plan);
    const auto t2 = Clock::now();
    update(plan);
    const auto t3 = Clock::now();
    schedule_s += std::chrono::duration<double>(t1 - t0).count();
    update_s += std::chrono::duration<double>(t3 - t2).count();
    state.SetIterationTime(
        std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
    tokens += plan.batch.num_tokens();
    sequences += static_cast<int64_t>(plan.scheduled.size());
    while (scheduler->num_running() + scheduler->num_waiting() < n) submit();
  }
  state.counters["seqs_per_step"] = benchmark::Counter(
      static_cast<double>(sequences), benchmark::Counter::kAvgIterations);
  state.counters["tokens_per_step"] = benchmark::Counter(
      static_cast<double>(tokens), benchmark::Counter::kAvgIterations);
  const double steps = static_cast<double>(state.iterations());
  state.counters["schedule_us"] = schedule_s / steps * 1e6;
  state.counters["update_us"] = update_s / steps * 1e6;
  state.counters["preemptions"] =
      static_cast<double>(scheduler->counters().preemptions);
}
BENCHMARK(BM_ScheduleUpdate)
    ->ArgNames({"running", "stop_strings"})
    ->Args({256, 0})
    ->Args({1024, 0})
    ->Args({256, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The sampler's share of Update: greedy Sample of N rows of kVocab logits
// (one-hot, like the fake engine's), one sampler per row.
void BM_GreedySampleRows(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  engine::SamplingParams params;
  params.temperature = 0;
  std::vector<engine::SequenceSampler> samplers;
  const std::vector<int32_t> prompt(kPromptTokens, 'a');
  for (int32_t i = 0; i < n; ++i) {
    samplers.push_back(
        std::move(*engine::SequenceSampler::Create(params, kVocab, prompt)));
  }
  std::vector<float> logits(static_cast<size_t>(n) * kVocab, 0.0f);
  for (int32_t i = 0; i < n; ++i) logits[i * kVocab + 'a' + i % 26] = 1.0f;
  engine::SamplerScratch scratch;
  for (auto _ : state) {
    for (int32_t i = 0; i < n; ++i) {
      auto sample = samplers[i].Sample(
          absl::MakeConstSpan(logits.data() + i * kVocab, kVocab), &scratch);
      benchmark::DoNotOptimize(sample);
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_GreedySampleRows)->ArgName("rows")->Arg(256)->Arg(1024)->Unit(
    benchmark::kMicrosecond);

}  // namespace
}  // namespace paceline::scheduler

BENCHMARK_MAIN();
