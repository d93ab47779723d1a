// Scheduler steps over the fake engine with exact counters: continuous
// batching refill, the token budget with chunked prefill, preemption by
// recompute under a tiny pool, the victim order, overload ranking.

#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

FakeEngineOptions SmallEngine(int32_t block_size, int32_t num_blocks) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = block_size;
  o.num_blocks = num_blocks;
  return o;
}

std::vector<int32_t> Tags(const RecordedStep& step) {
  std::vector<int32_t> tags;
  for (const RecordedSlice& s : step.slices) tags.push_back(TagOf(s));
  return tags;
}

TEST(SchedulerTest, FinishedRequestIsRefilledInTheVeryNextStep) {
  Harness h(SmallEngine(4, 256),
            Opts(64, 4));
  std::vector<Submitted> r;
  r.push_back(h.Submit(TaggedPrompt(0, 4), /*max_tokens=*/3));
  for (int32_t tag = 1; tag <= 4; ++tag) r.push_back(h.Submit(TaggedPrompt(tag, 4), 10));

  h.Step();  // four prompts, one token sampled each
  ASSERT_EQ(h.steps().size(), 1u);
  EXPECT_EQ(Tags(h.steps()[0]), (std::vector<int32_t>{0, 1, 2, 3}));
  for (const RecordedSlice& s : h.steps()[0].slices) {
    EXPECT_EQ(s.token_count, 4);
    EXPECT_EQ(s.position_begin, 0);
    EXPECT_EQ(s.num_logits, 1);
  }
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  h.Step();
  h.Step();  // request 0 samples its third token and finishes
  EXPECT_TRUE(r[0].sink->finished());
  EXPECT_EQ(r[0].sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(r[0].sink->tokens().size(), 3u);
  EXPECT_EQ(h.scheduler().num_running(), 3);
  EXPECT_EQ(h.scheduler().counters().finished[static_cast<int>(FinishReason::kLength)], 1);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(Tags(h.steps()[i]), (std::vector<int32_t>{0, 1, 2, 3}));
  }

  h.Step();  // the freed slot goes to request 4 right away
  const RecordedStep& refill = h.steps()[3];
  EXPECT_EQ(Tags(refill), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(refill.slices[3].token_count, 4);
  EXPECT_EQ(refill.slices[3].position_begin, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(refill.slices[i].token_count, 1);
    EXPECT_EQ(refill.slices[i].position_begin, 4 + 2);
  }
  EXPECT_EQ(h.scheduler().num_running(), 4);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
}

TEST(SchedulerTest, LongPromptIsChunkedAndEveryDecodeRunsEveryStep) {
  FakeEngineOptions eo = SmallEngine(16, 1024);
  eo.max_tokens_per_step = 512;
  Harness h(eo, Opts(0, 16));
  ASSERT_EQ(h.scheduler().max_batched_tokens(), 512);
  for (int32_t tag = 0; tag < 8; ++tag) h.Submit(TaggedPrompt(tag, 8), 100);
  h.Step();
  h.Step();
  EXPECT_EQ(h.steps()[0].tokens.size(), 64u);
  EXPECT_EQ(h.steps()[1].tokens.size(), 8u);

  const Submitted long_request = h.Submit(TaggedPrompt(100, 4000), 10);
  // 8 decode tokens per step leave 504 for the prompt: 7 chunks of 504,
  // then 472.
  for (int k = 0; k < 8; ++k) {
    h.Step();
    const RecordedStep& step = h.steps().back();
    ASSERT_EQ(step.slices.size(), 9u) << "step " << k;
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(TagOf(step.slices[i]), i);
      EXPECT_EQ(step.slices[i].token_count, 1);
      EXPECT_EQ(step.slices[i].position_begin, 8 + 1 + k);
      EXPECT_EQ(step.slices[i].num_logits, 1);
    }
    const RecordedSlice& chunk = step.slices[8];
    EXPECT_EQ(TagOf(chunk), 100);
    EXPECT_EQ(chunk.position_begin, 504 * k);
    EXPECT_EQ(chunk.token_count, k < 7 ? 504 : 472);
    EXPECT_EQ(chunk.num_logits, k == 7 ? 1 : 0);
    EXPECT_EQ(step.tokens.size(), k < 7 ? 512u : 480u);
  }
  EXPECT_EQ(long_request.sink->tokens().size(), 1u);
  h.Step();
  EXPECT_EQ(h.steps().back().slices.size(), 9u);
  EXPECT_EQ(h.steps().back().tokens.size(), 9u);
}

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;
  int64_t preemptions = 0;
};

// Six requests of 6 prompt tokens and 20 generated (7 blocks of 4 each),
// run to completion over a pool of `num_blocks`.
Outputs RunSix(int32_t num_blocks) {
  Harness h(SmallEngine(4, num_blocks),
            Opts(64, 8));
  std::vector<Submitted> r;
  for (int32_t tag = 0; tag < 6; ++tag) r.push_back(h.Submit(TaggedPrompt(tag, 6), 20));
  h.RunUntilIdle();
  Outputs out;
  int64_t per_request = 0;
  for (const Submitted& s : r) {
    EXPECT_TRUE(s.sink->finished());
    EXPECT_EQ(s.sink->finish().reason, FinishReason::kLength);
    EXPECT_EQ(s.sink->finish().usage.completion_tokens, 20);
    per_request += s.sink->finish().usage.preemptions;
    out.tokens.push_back(s.sink->tokens());
  }
  out.preemptions = h.scheduler().counters().preemptions;
  EXPECT_EQ(per_request, out.preemptions);
  const kvpager::PagerStats stats = h.scheduler().pager().Stats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_TRUE(h.scheduler().pager().CheckConsistency().ok());
  return out;
}

TEST(SchedulerTest, PreemptionUnderATinyPoolKeepsEveryOutput) {
  const Outputs roomy = RunSix(256);
  EXPECT_EQ(roomy.preemptions, 0);
  const Outputs tight = RunSix(10);  // room for one request and a half
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  for (const auto& t : roomy.tokens) EXPECT_EQ(t.size(), 20u);
}

class PreemptionRecorder : public SchedulerMetrics {
 public:
  void OnPreempted(absl::string_view tenant) override {
    preempted.emplace_back(tenant);
  }
  std::vector<std::string> preempted;
};

TEST(SchedulerTest, VictimIsTheLowestClassThenTheLatestArrival) {
  PreemptionRecorder recorder;
  SchedulerOptions options = Opts(64, 8);
  options.tenants = {Tenant("i"), Tenant("b"), Tenant("s")};
  // 8 prompt tokens (2 blocks) + 9 generated: 4 blocks each; 8 in the pool.
  Harness h(SmallEngine(4, 8), options, &recorder);
  RequestSpec i = h.Spec(TaggedPrompt(0, 8), 9, "i");
  i.priority = PriorityClass::kInteractive;
  RequestSpec b = h.Spec(TaggedPrompt(1, 8), 9, "b");
  b.priority = PriorityClass::kBatch;
  RequestSpec s = h.Spec(TaggedPrompt(2, 8), 9, "s");
  s.priority = PriorityClass::kStandard;
  std::vector<Submitted> r = {h.Submit(std::move(i)), h.Submit(std::move(b)),
                              h.Submit(std::move(s))};
  h.Step();  // three prompts: 6 blocks
  EXPECT_TRUE(recorder.preempted.empty());
  // Each now needs a third block; two are left. The batch request goes,
  // although the standard one arrived later.
  const StepPlan& plan = h.Step();
  EXPECT_EQ(plan.num_preempted, 1);
  ASSERT_EQ(recorder.preempted.size(), 1u);
  EXPECT_EQ(recorder.preempted[0], "b");
  EXPECT_EQ(Tags(h.steps().back()), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  h.RunUntilIdle();
  for (const Submitted& x : r) {
    EXPECT_EQ(x.sink->finish().reason, FinishReason::kLength);
    EXPECT_EQ(x.sink->tokens().size(), 9u);
  }
  EXPECT_EQ(r[1].sink->finish().usage.preemptions,
            static_cast<int32_t>(std::count(recorder.preempted.begin(),
                                            recorder.preempted.end(), "b")));
}

TEST(SchedulerTest, OverloadRanksDecodesByClassThenSlack) {
  Harness h(SmallEngine(4, 256),
            Opts(16, 8));
  struct Setup {
    PriorityClass priority;
    double pace;
    int64_t buffered;
  };
  const Setup setups[] = {
      {PriorityClass::kBatch, 0, 0},          // 0
      {PriorityClass::kStandard, 0, 0},       // 1: unpaced, slack 0
      {PriorityClass::kStandard, 10, 50},     // 2: slack 5 s
      {PriorityClass::kStandard, 10, 5},      // 3: slack 0.5 s
      {PriorityClass::kInteractive, 1, 100},  // 4: slack 100 s
      {PriorityClass::kStandard, 10, 0},      // 5: slack 0
  };
  std::vector<Submitted> r;
  for (int32_t tag = 0; tag < 6; ++tag) {
    RequestSpec spec = h.Spec(TaggedPrompt(tag, 2), 50);
    spec.priority = setups[tag].priority;
    spec.pace_tokens_per_s = setups[tag].pace;
    r.push_back(h.Submit(std::move(spec)));
    r.back().sink->set_buffered_tokens(setups[tag].buffered);
  }
  h.Step();  // admitted by class, then in order
  EXPECT_EQ(Tags(h.steps().back()), (std::vector<int32_t>{4, 1, 2, 3, 5, 0}));
  h.Step();  // enough budget: everyone decodes
  EXPECT_EQ(h.steps().back().slices.size(), 6u);

  ASSERT_TRUE(h.scheduler().set_max_batched_tokens(3).ok());
  h.Step();
  EXPECT_EQ(Tags(h.steps().back()), (std::vector<int32_t>{4, 1, 5}));
  r[5].sink->set_buffered_tokens(100);  // now 10 s of slack
  h.Step();
  EXPECT_EQ(Tags(h.steps().back()), (std::vector<int32_t>{4, 1, 3}));
  EXPECT_EQ(h.scheduler().num_running(), 6);
  EXPECT_FALSE(h.scheduler().set_max_batched_tokens(0).ok());
  EXPECT_FALSE(h.scheduler().set_max_batched_tokens(513).ok());
}

TEST(SchedulerTest, EngineFailureFinishesTheStepsRequestsWithItsError) {
  Harness h(SmallEngine(4, 256),
            Opts(64, 8));
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 5);
  h.Step();
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 5);
  h.engine().FailNextForward(absl::InternalError("device lost"));
  h.Step();  // a decodes, b prefills; both fail
  for (const Submitted* s : {&a, &b}) {
    ASSERT_TRUE(s->sink->finished());
    EXPECT_EQ(s->sink->finish().reason, FinishReason::kError);
    EXPECT_EQ(s->sink->finish().status, absl::InternalError("device lost"));
  }
  EXPECT_EQ(a.sink->tokens().size(), 1u);
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
  EXPECT_EQ(h.scheduler().counters().finished[static_cast<int>(FinishReason::kError)], 2);
}

TEST(SchedulerTest, PrefixCacheHitsSkipComputeAndKeepOutput) {
  Harness h(SmallEngine(4, 256),
            Opts(64, 8));
  const Submitted first = h.Submit(TaggedPrompt(0, 10), 4);
  h.RunUntilIdle();
  const Submitted second = h.Submit(TaggedPrompt(0, 10), 4);
  h.Step();
  // Two full blocks (8 tokens) come from the cache: 2 tokens computed.
  EXPECT_EQ(h.steps().back().slices[0].position_begin, 8);
  EXPECT_EQ(h.steps().back().slices[0].token_count, 2);
  h.RunUntilIdle();
  EXPECT_EQ(second.sink->tokens(), first.sink->tokens());
  EXPECT_EQ(second.sink->finish().usage.cached_prompt_tokens, 8);
  EXPECT_EQ(first.sink->finish().usage.cached_prompt_tokens, 0);
}

}  // namespace
}  // namespace paceline::scheduler::testing
