#ifndef PACELINE_TESTS_TESTING_SCHEDULER_TEST_UTIL_H_
#define PACELINE_TESTS_TESTING_SCHEDULER_TEST_UTIL_H_

// A scheduler over the fake engine, stepped by hand: Step() is the serving
// loop's iteration (Schedule; CopyBlocks, CopyStates + Forward, or
// ForwardAndSample for the sampler's engine rows; Sample; Update) with the
// recorded batches kept for assertions.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "scheduler/step.h"
#include "scheduler/step_sampler.h"
#include "scheduler/token_sink.h"
#include "tests/testing/fake_engine.h"

namespace paceline::scheduler::testing {

using ::paceline::testing::FakeEngine;
using ::paceline::testing::FakeEngineOptions;
using ::paceline::testing::RecordedSlice;
using ::paceline::testing::RecordedStep;

// Byte-level vocabulary: ids 0-255 are bytes, 256 BOS, 257 EOS, then
// fillers (used as per-request tag tokens).
inline constexpr int32_t kEos = 257;
inline constexpr int32_t kFirstTag = 1000;

inline std::unique_ptr<engine::Tokenizer> ByteTokenizer(int32_t n_vocab) {
  auto tokenizer = engine::MakeByteLevelTokenizer(n_vocab);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(*tokenizer);
}

// GCC's -Wmissing-field-initializers flags designated initializers that
// leave members out, so tests build options with these.
inline TenantConfig Tenant(std::string name, double weight = 1.0,
                           int32_t max_running = 0, int32_t max_queued = 0,
                           int64_t tokens_per_minute = 0) {
  TenantConfig t;
  t.name = std::move(name);
  t.weight = weight;
  t.max_running = max_running;
  t.max_queued = max_queued;
  t.tokens_per_minute = tokens_per_minute;
  return t;
}

inline std::vector<TenantConfig> OneTenant() { return {Tenant("t")}; }

inline SchedulerOptions Opts(int32_t max_batched_tokens, int32_t max_running,
                             std::vector<TenantConfig> tenants = {}) {
  SchedulerOptions o;
  o.max_batched_tokens = max_batched_tokens;
  o.max_running = max_running;
  o.tenants = std::move(tenants);
  return o;
}

// The text of `ids` (the engine hands over ids only; delivery makes text).
inline std::string TextOf(const engine::Tokenizer& tokenizer,
                          const std::vector<int32_t>& ids) {
  engine::IncrementalDetokenizer detokenizer(&tokenizer);
  std::string text;
  for (int32_t id : ids) text += detokenizer.Push(id);
  return text + detokenizer.Flush();
}

inline StopConditions Stop(int32_t max_tokens) {
  StopConditions s;
  s.max_tokens = max_tokens;
  return s;
}

// A prompt of `n` tokens starting with tag `kFirstTag + tag`, so each
// request's slices can be told apart (RecordedSlice::first_token) and no
// two requests share a prefix block.
inline std::vector<int32_t> TaggedPrompt(int32_t tag, int32_t n) {
  std::vector<int32_t> p(n);
  p[0] = kFirstTag + tag;
  for (int32_t i = 1; i < n; ++i) p[i] = 'A' + (tag + i) % 26;
  return p;
}

inline int32_t TagOf(const RecordedSlice& s) { return s.first_token - kFirstTag; }

struct Submitted {
  RequestId id = 0;
  std::shared_ptr<CollectingSink> sink;
};

class Harness {
 public:
  Harness(FakeEngineOptions engine_options, SchedulerOptions options,
          SchedulerMetrics* metrics = nullptr,
          EngineSampling engine_sampling = EngineSampling::kAuto)
      : tokenizer_(ByteTokenizer(engine_options.n_vocab)),
        engine_(std::move(engine_options)),
        sampler_(engine_, engine_sampling) {
    if (options.tenants.empty()) options.tenants = OneTenant();
    auto s = Scheduler::Create(options, engine_, tokenizer_.get(), &clock_,
                               metrics);
    EXPECT_TRUE(s.ok()) << s.status();
    scheduler_ = std::move(*s);
  }

  Scheduler& scheduler() { return *scheduler_; }
  StepSampler& sampler() { return sampler_; }
  FakeEngine& engine() { return engine_; }
  ManualClock& clock() { return clock_; }
  const engine::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::vector<RecordedStep>& steps() const { return engine_.steps(); }

  RequestSpec Spec(std::vector<int32_t> prompt, int32_t max_tokens,
                   const std::string& tenant = "t") {
    RequestSpec spec;
    spec.tenant = tenant;
    spec.prompt = std::move(prompt);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = max_tokens;
    spec.sink = std::make_shared<CollectingSink>();
    return spec;
  }

  // Submits and expects success.
  Submitted Submit(RequestSpec spec) {
    Submitted s{next_id_++, std::static_pointer_cast<CollectingSink>(spec.sink)};
    const absl::Status status = scheduler_->Submit(s.id, std::move(spec));
    EXPECT_TRUE(status.ok()) << status;
    return s;
  }
  Submitted Submit(std::vector<int32_t> prompt, int32_t max_tokens,
                   const std::string& tenant = "t") {
    return Submit(Spec(std::move(prompt), max_tokens, tenant));
  }

  // One iteration of the serving loop. Returns the plan (valid until the
  // next Step).
  const StepPlan& Step() {
    const StepPlan& plan = scheduler_->Schedule();
    Run(plan);
    return plan;
  }
  // The rest of the step for the plan the last Schedule returned: Forward,
  // Sample, Update.
  void Run(const StepPlan& plan) {
    const absl::StatusOr<EngineOutput> output = Forward(plan);
    scheduler_->Update(sampler_.Sample(plan, output));
  }

  // The engine's part of a step, as the serving loop runs it.
  absl::StatusOr<EngineOutput> Forward(const StepPlan& plan) {
    if (plan.empty()) return EngineOutput{};
    if (!plan.copies.empty()) {
      const absl::Status copied = engine_.CopyBlocks(plan.copies);
      if (!copied.ok()) return copied;
    }
    if (!plan.state_copies.empty()) {  // a hybrid model's (step.h)
      const absl::Status copied = engine_.CopyStates(plan.state_copies);
      if (!copied.ok()) return copied;
    }
    logits_.assign(
        static_cast<size_t>(plan.num_logit_rows) * scheduler_->vocab_size(),
        0.0f);
    const absl::Span<const engine::RowSampling> rows =
        sampler_.EngineRows(plan);
    absl::Status status;
    if (rows.empty()) {
      tokens_.clear();
      status = engine_.Forward(plan.batch, absl::MakeSpan(logits_));
    } else {
      tokens_.assign(rows.size(), -1);
      status = engine_.ForwardAndSample(
          plan.batch, rows, absl::MakeSpan(tokens_), absl::MakeSpan(logits_));
    }
    if (!status.ok()) return status;
    return EngineOutput{logits_, tokens_};
  }

  // Steps until nothing is runnable (at most `limit` steps); returns the
  // number of steps.
  int64_t RunUntilIdle(int64_t limit = 100000) {
    int64_t n = 0;
    while (scheduler_->HasRunnable() && n < limit) {
      Step();
      ++n;
    }
    return n;
  }

 private:
  ManualClock clock_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  FakeEngine engine_;
  StepSampler sampler_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  RequestId next_id_ = 1;
};

}  // namespace paceline::scheduler::testing

#endif  // PACELINE_TESTS_TESTING_SCHEDULER_TEST_UTIL_H_
