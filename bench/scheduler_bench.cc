// Scheduler overhead per engine step: Schedule + Sample + Update (planning,
// block growth, MarkComputed, greedy sampling, stop checks, the sink
// handoff; text is delivery's: delivery_bench.cc) with N sequences
// running, over the fake engine, whose Forward is not timed. Steady state of continuous batching: every
// sequence decodes one token a step; a finished one is replaced before the
// next step (its prefill then rides along in that step). And tenant
// isolation: tenant B's time to first token next to tenant A's 8k-token
// prompts, over the fake engine under a step-cost model on a manual clock.
// Results go to bench/RESULTS.md.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/time/time.h"
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
    ->ArgName("running")
    ->Arg(256)
    ->Arg(1024)
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

// Tenant isolation (issue 18 scenario 8): tenant B sends short requests
// (64-token prompts, 16 generated) as a Poisson stream of 4 per second
// (seeded); tenant A, when present, keeps two 8,000-token prompts (16
// generated) in flight, a new one as each finishes. The real scheduler
// runs over the fake engine with a 512-token step; a step takes the cost
// model's time on a manual clock, and arrivals during a step are submitted
// after it (their TTFT counts from the true arrival). Cost models:
// 0 = proportional, 20 us per token (a full step 10.24 ms); 1 = affine,
// 5 ms + 10 us per token (a full step 10.12 ms, a decode step ~5 ms).
// Reported: B's TTFT p50 / p99 solo and next to A, p99 mixed / solo, and
// A's prompts finished within the 300 s, for the admission reserve given
// in percent (0 = the behavior before it).
class TtftSink final : public TokenSink {
 public:
  TtftSink(const Clock* clock, absl::Time arrival, int32_t* in_flight)
      : clock_(clock), arrival_(arrival), in_flight_(in_flight) {}
  void OnAccepted(const AcceptInfo&) override {}
  void OnTokens(const TokenDelta& delta) override {
    if (first_ == absl::InfinitePast() && !delta.ids.empty()) {
      first_ = clock_->Now();
    }
  }
  void OnFinished(const FinishInfo& info) override {
    if (in_flight_ != nullptr) --*in_flight_;
    finished_ = info.timings.finished;
  }
  absl::Time finished() const { return finished_; }
  double ttft_ms() const {
    return absl::ToDoubleMilliseconds(first_ - arrival_);
  }

 private:
  const Clock* const clock_;
  const absl::Time arrival_;
  int32_t* const in_flight_;
  absl::Time first_ = absl::InfinitePast();
  absl::Time finished_ = absl::InfinitePast();
};

struct TtftResult {
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t steps = 0;
  int64_t tokens = 0;
  int64_t a_finished = 0;  // A's prompts finished within the horizon
  int64_t b_requests = 0;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  return v[i];
}

TtftResult SimulateTtft(bool with_a, double admission_reserve, int cost_model,
                        absl::Duration horizon) {
  testing::FakeEngineOptions eo;
  eo.n_vocab = kVocab;
  eo.block_size = kBlockSize;
  eo.num_blocks = 4096;
  eo.max_tokens_per_step = 512;
  eo.record = false;
  eo.script = [](absl::Span<const int32_t> context) {
    return static_cast<int32_t>('a' + context.size() % 26);
  };
  testing::FakeEngine engine(eo);
  auto tokenizer = std::move(*engine::MakeByteLevelTokenizer(kVocab));
  ManualClock clock;
  SchedulerOptions options;
  options.tenants = {TenantConfig{"a", 1.0, 0, 0, 0},
                     TenantConfig{"b", 1.0, 0, 0, 0}};
  options.admission_reserve = admission_reserve;
  auto scheduler =
      std::move(*Scheduler::Create(options, engine, tokenizer.get(), &clock));
  StepSampler sampler(engine, EngineSampling::kAuto);
  const absl::Time start = clock.Now();
  const absl::Time end = start + horizon;

  std::mt19937_64 rng(42);
  std::exponential_distribution<double> gap_s(4.0);
  std::vector<absl::Time> b_arrivals;
  for (absl::Time t = start + absl::Seconds(gap_s(rng)); t < end;
       t += absl::Seconds(gap_s(rng))) {
    b_arrivals.push_back(t);
  }
  RequestId next_id = 1;
  auto submit = [&](const std::string& tenant, int32_t prompt_tokens,
                    std::shared_ptr<TokenSink> sink) {
    RequestSpec spec;
    spec.tenant = tenant;
    spec.prompt.resize(prompt_tokens);
    // Unique prompts (the id's bytes first): no prefix-cache hits.
    for (int32_t i = 0; i < prompt_tokens; ++i) {
      spec.prompt[i] = static_cast<int32_t>(i < 3 ? (next_id >> (8 * i)) % 256
                                                  : (next_id * 7 + i) % 256);
    }
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = 16;
    spec.stop.ignore_eos = true;
    spec.sink = std::move(sink);
    (void)scheduler->Submit(next_id++, std::move(spec));
  };
  std::vector<std::shared_ptr<TtftSink>> a_sinks;
  std::vector<std::shared_ptr<TtftSink>> b_sinks;
  size_t next_b = 0;
  int32_t a_in_flight = 0;
  std::vector<float> logits;
  TtftResult result;
  while (clock.Now() < end || scheduler->num_running() > 0 ||
         scheduler->num_waiting() > 0) {
    const absl::Time now = clock.Now();
    for (; next_b < b_arrivals.size() && b_arrivals[next_b] <= now; ++next_b) {
      b_sinks.push_back(
          std::make_shared<TtftSink>(&clock, b_arrivals[next_b], nullptr));
      submit("b", 64, b_sinks.back());
    }
    while (with_a && now < end && a_in_flight < 2) {
      ++a_in_flight;
      a_sinks.push_back(std::make_shared<TtftSink>(&clock, now, &a_in_flight));
      submit("a", 8000, a_sinks.back());
    }
    if (!scheduler->HasRunnable()) {
      if (next_b == b_arrivals.size()) break;
      clock.Set(b_arrivals[next_b]);
      continue;
    }
    const StepPlan& plan = scheduler->Schedule();
    logits.resize(static_cast<size_t>(plan.num_logit_rows) * kVocab);
    (void)engine.Forward(plan.batch, absl::MakeSpan(logits));
    const int64_t tokens = plan.batch.num_tokens();
    clock.Advance(cost_model == 0 ? absl::Microseconds(20 * tokens)
                                  : absl::Milliseconds(5) +
                                        absl::Microseconds(10 * tokens));
    scheduler->Update(
        sampler.Sample(plan, EngineOutput{absl::MakeConstSpan(logits), {}}));
    ++result.steps;
    result.tokens += tokens;
  }
  result.b_requests = static_cast<int64_t>(b_sinks.size());
  std::vector<double> ttft;
  for (const auto& sink : b_sinks) ttft.push_back(sink->ttft_ms());
  for (const auto& sink : a_sinks) result.a_finished += sink->finished() <= end;
  result.p50_ms = Percentile(ttft, 0.50);
  result.p99_ms = Percentile(ttft, 0.99);
  return result;
}

void BM_TenantTtft(benchmark::State& state) {
  const double reserve = static_cast<double>(state.range(0)) / 100;
  const int cost_model = static_cast<int>(state.range(1));
  const absl::Duration horizon = absl::Seconds(300);
  TtftResult solo;
  TtftResult mixed;
  int64_t b_requests = 0;
  for (auto _ : state) {
    solo = SimulateTtft(false, reserve, cost_model, horizon);
    mixed = SimulateTtft(true, reserve, cost_model, horizon);
    b_requests = mixed.b_requests;
  }
  state.counters["b_solo_p50_ms"] = solo.p50_ms;
  state.counters["b_solo_p99_ms"] = solo.p99_ms;
  state.counters["b_mixed_p50_ms"] = mixed.p50_ms;
  state.counters["b_mixed_p99_ms"] = mixed.p99_ms;
  state.counters["p99_ratio"] = mixed.p99_ms / solo.p99_ms;
  state.counters["a_finished"] = static_cast<double>(mixed.a_finished);
  state.counters["b_requests"] = static_cast<double>(b_requests);
}
BENCHMARK(BM_TenantTtft)
    ->ArgNames({"reserve_pct", "cost"})
    ->ArgsProduct({{0, 50}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace paceline::scheduler

BENCHMARK_MAIN();
