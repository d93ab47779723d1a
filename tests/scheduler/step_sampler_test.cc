// The sampling stage over the fake engine: which rows go to the engine,
// host rows, engine tokens, mixed steps, per-request sampling errors (a
// non-finite logit, an engine token outside the vocabulary), logprobs, a
// failed step, and draws that depend only on (seed, step).

#include "scheduler/step_sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int32_t kVocab = 2048;  // above the tag tokens (kFirstTag)

FakeEngineOptions Engine() {
  FakeEngineOptions o;
  o.n_vocab = kVocab;
  o.block_size = 4;
  o.num_blocks = 256;
  return o;
}

Harness Make(EngineSampling mode) {
  return Harness(Engine(), Opts(64, 8), nullptr, mode);
}

const ScheduledRequest& Scheduled(const StepPlan& plan, RequestId id) {
  for (const ScheduledRequest& s : plan.scheduled) {
    if (s.request->id() == id) return s;
  }
  ADD_FAILURE() << "request " << id << " is not in the plan";
  return plan.scheduled.front();
}

// The token a logits row's largest logit names (the fake engine's row is
// one-hot).
int32_t Argmax(absl::Span<const float> row) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(row.size()); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

TEST(StepSamplerTest, EngineSamplingFollowsTheModeAndTheEngine) {
  // The fake engine does not sample on a device: kAuto keeps rows on the
  // host.
  EXPECT_FALSE(Make(EngineSampling::kAuto).sampler().engine_samples());
  EXPECT_FALSE(Make(EngineSampling::kNever).sampler().engine_samples());
  EXPECT_TRUE(Make(EngineSampling::kAlways).sampler().engine_samples());
}

TEST(StepSamplerTest, HostRowsTakeEachRowsTokenAndAdvanceTheSampler) {
  Harness h = Make(EngineSampling::kNever);
  const Submitted a = h.Submit(TaggedPrompt(0, 5), 4);
  const Submitted b = h.Submit(TaggedPrompt(1, 3), 4);
  const StepPlan& plan = h.scheduler().Schedule();
  ASSERT_EQ(plan.num_logit_rows, 2);
  EXPECT_TRUE(h.sampler().EngineRows(plan).empty());
  const absl::StatusOr<EngineOutput> output = h.Forward(plan);
  ASSERT_TRUE(output.ok()) << output.status();
  const StepTokens& tokens = h.sampler().Sample(plan, output);
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  ASSERT_EQ(tokens.rows.size(), 2u);
  for (const RequestId id : {a.id, b.id}) {
    const ScheduledRequest& s = Scheduled(plan, id);
    const SampledRow& row = tokens.rows[s.logits_row];
    ASSERT_TRUE(row.status.ok()) << row.status;
    EXPECT_EQ(row.sample.token,
              Argmax(output->logits.subspan(s.logits_row * kVocab, kVocab)));
    EXPECT_EQ(s.request->sampler().step(), 1u);
  }
  const int32_t a_token =
      tokens.rows[Scheduled(plan, a.id).logits_row].sample.token;
  h.scheduler().Update(tokens);
  EXPECT_EQ(a.sink->tokens(), std::vector<int32_t>{a_token});
}

TEST(StepSamplerTest, EngineRowsCarryEachRequestsParametersAndUniform) {
  Harness h = Make(EngineSampling::kAlways);
  RequestSpec spec = h.Spec(TaggedPrompt(0, 4), 4);
  spec.sampling.temperature = 0.7f;
  spec.sampling.top_k = 5;
  spec.sampling.top_p = 0.9f;
  spec.sampling.min_p = 0.1f;
  spec.sampling.seed = 42;
  h.Submit(std::move(spec));
  const StepPlan& plan = h.scheduler().Schedule();
  const absl::Span<const engine::RowSampling> rows =
      h.sampler().EngineRows(plan);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].in_engine);
  EXPECT_EQ(rows[0].temperature, 0.7f);
  EXPECT_EQ(rows[0].top_k, 5);
  EXPECT_EQ(rows[0].top_p, 0.9f);
  EXPECT_EQ(rows[0].min_p, 0.1f);
  EXPECT_EQ(rows[0].uniform, engine::SamplingUniform(42, 0));
  h.Run(plan);
  // The next step draws with the next uniform.
  const StepPlan& next = h.scheduler().Schedule();
  const absl::Span<const engine::RowSampling> next_rows =
      h.sampler().EngineRows(next);
  ASSERT_EQ(next_rows.size(), 1u);
  EXPECT_EQ(next_rows[0].uniform, engine::SamplingUniform(42, 1));
  h.Run(next);
}

TEST(StepSamplerTest, MixedStepsSendOnlyRowsWithoutPenaltiesOrLogprobs) {
  Harness h = Make(EngineSampling::kAlways);
  RequestSpec plain = h.Spec(TaggedPrompt(0, 4), 6);
  RequestSpec logprobs = h.Spec(TaggedPrompt(1, 4), 6);
  logprobs.sampling.logprobs = true;
  RequestSpec penalty = h.Spec(TaggedPrompt(2, 4), 6);
  penalty.sampling.repetition_penalty = 1.2f;
  const Submitted a = h.Submit(std::move(plain));
  const Submitted b = h.Submit(std::move(logprobs));
  const Submitted c = h.Submit(std::move(penalty));
  const StepPlan& plan = h.scheduler().Schedule();
  ASSERT_EQ(plan.num_logit_rows, 3);
  const absl::Span<const engine::RowSampling> rows =
      h.sampler().EngineRows(plan);
  ASSERT_EQ(rows.size(), 3u);
  for (const ScheduledRequest& s : plan.scheduled) {
    EXPECT_EQ(rows[s.logits_row].in_engine, s.request->id() == a.id);
  }
  // The engine's token is taken for the engine row, the logits are
  // sampled for the others.
  std::vector<float> logits(3 * kVocab, 0.0f);
  std::vector<int32_t> engine_tokens(3, -1);
  for (const ScheduledRequest& s : plan.scheduled) {
    logits[s.logits_row * kVocab + 'x'] = 1.0f;
    if (s.request->id() == a.id) engine_tokens[s.logits_row] = 'q';
  }
  const StepTokens& tokens =
      h.sampler().Sample(plan, EngineOutput{logits, engine_tokens});
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  EXPECT_EQ(tokens.rows[Scheduled(plan, a.id).logits_row].sample.token, 'q');
  EXPECT_EQ(tokens.rows[Scheduled(plan, b.id).logits_row].sample.token, 'x');
  EXPECT_EQ(tokens.rows[Scheduled(plan, c.id).logits_row].sample.token, 'x');
  for (const ScheduledRequest& s : plan.scheduled) {
    EXPECT_EQ(s.request->sampler().step(), 1u);
  }
  h.scheduler().Update(tokens);
  EXPECT_EQ(a.sink->tokens(), std::vector<int32_t>{'q'});
  EXPECT_EQ(b.sink->tokens(), std::vector<int32_t>{'x'});
}

// Run through the engine's own sampling, the mixed requests end as they
// would on the host.
TEST(StepSamplerTest, MixedStepsGiveTheHostsGreedyTokens) {
  std::vector<int32_t> outputs[2][3];
  int i = 0;
  for (const EngineSampling mode :
       {EngineSampling::kAlways, EngineSampling::kNever}) {
    Harness h = Make(mode);
    RequestSpec plain = h.Spec(TaggedPrompt(0, 4), 6);
    RequestSpec logprobs = h.Spec(TaggedPrompt(1, 4), 6);
    logprobs.sampling.logprobs = true;
    RequestSpec penalty = h.Spec(TaggedPrompt(2, 4), 6);
    penalty.sampling.repetition_penalty = 1.2f;
    const Submitted s[] = {h.Submit(std::move(plain)),
                           h.Submit(std::move(logprobs)),
                           h.Submit(std::move(penalty))};
    h.RunUntilIdle();
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(s[r].sink->finished());
      EXPECT_EQ(s[r].sink->finish().reason, FinishReason::kLength);
      outputs[i][r] = s[r].sink->tokens();
    }
    ++i;
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outputs[0][r].size(), 6u);
    EXPECT_EQ(outputs[0][r], outputs[1][r]) << "request " << r;
  }
}

TEST(StepSamplerTest, EngineTokensAreTakenAndBadOnesFailOnlyTheirRequest) {
  Harness h = Make(EngineSampling::kAlways);
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 3);
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 3);
  const Submitted c = h.Submit(TaggedPrompt(2, 4), 3);
  const StepPlan& plan = h.scheduler().Schedule();
  ASSERT_EQ(h.sampler().EngineRows(plan).size(), 3u);
  std::vector<float> logits(3 * kVocab, 0.0f);
  std::vector<int32_t> engine_tokens(3);
  for (const ScheduledRequest& s : plan.scheduled) {
    const RequestId id = s.request->id();
    engine_tokens[s.logits_row] = id == a.id   ? 'q'
                                  : id == b.id ? -1 - 17
                                               : kVocab;
  }
  const StepTokens& tokens =
      h.sampler().Sample(plan, EngineOutput{logits, engine_tokens});
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  const SampledRow& row_a = tokens.rows[Scheduled(plan, a.id).logits_row];
  ASSERT_TRUE(row_a.status.ok());
  EXPECT_EQ(row_a.sample.token, 'q');
  EXPECT_EQ(row_a.sample.logprob, 0.0f);
  EXPECT_TRUE(row_a.sample.top_logprobs.empty());
  const SampledRow& row_b = tokens.rows[Scheduled(plan, b.id).logits_row];
  EXPECT_EQ(row_b.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(row_b.status.message().find("token 17 is not finite at step 0"),
            std::string::npos)
      << row_b.status;
  const SampledRow& row_c = tokens.rows[Scheduled(plan, c.id).logits_row];
  EXPECT_EQ(row_c.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(row_c.status.message().find("outside the vocabulary of 2048"),
            std::string::npos)
      << row_c.status;
  // Failed rows leave their sampler as it was.
  EXPECT_EQ(Scheduled(plan, a.id).request->sampler().step(), 1u);
  EXPECT_EQ(Scheduled(plan, b.id).request->sampler().step(), 0u);
  EXPECT_EQ(Scheduled(plan, c.id).request->sampler().step(), 0u);

  h.scheduler().Update(tokens);
  EXPECT_EQ(a.sink->tokens(), std::vector<int32_t>{'q'});
  EXPECT_FALSE(a.sink->finished());
  for (const Submitted* s : {&b, &c}) {
    ASSERT_TRUE(s->sink->finished());
    EXPECT_EQ(s->sink->finish().reason, FinishReason::kError);
    EXPECT_EQ(s->sink->finish().status.code(), absl::StatusCode::kInternal);
  }
  EXPECT_EQ(h.scheduler().num_running(), 1);
  h.RunUntilIdle();
  EXPECT_EQ(a.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
}

TEST(StepSamplerTest, NonFiniteHostLogitFailsOnlyItsRequest) {
  Harness h = Make(EngineSampling::kNever);
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 3);
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 3);
  const StepPlan& plan = h.scheduler().Schedule();
  const absl::StatusOr<EngineOutput> output = h.Forward(plan);
  ASSERT_TRUE(output.ok()) << output.status();
  std::vector<float> logits(output->logits.begin(), output->logits.end());
  const ScheduledRequest& sb = Scheduled(plan, b.id);
  logits[sb.logits_row * kVocab + 99] = std::numeric_limits<float>::quiet_NaN();
  const StepTokens& tokens = h.sampler().Sample(plan, EngineOutput{logits, {}});
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  EXPECT_TRUE(tokens.rows[Scheduled(plan, a.id).logits_row].status.ok());
  const absl::Status& bad = tokens.rows[sb.logits_row].status;
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal);
  EXPECT_NE(bad.message().find("token 99"), std::string::npos) << bad;
  EXPECT_EQ(sb.request->sampler().step(), 0u);
  h.scheduler().Update(tokens);
  ASSERT_TRUE(b.sink->finished());
  EXPECT_EQ(b.sink->finish().reason, FinishReason::kError);
  EXPECT_TRUE(b.sink->tokens().empty());
  EXPECT_EQ(a.sink->tokens().size(), 1u);
  h.RunUntilIdle();
  EXPECT_EQ(a.sink->finish().reason, FinishReason::kLength);
}

TEST(StepSamplerTest, LogprobsComeWithTheSampleOnlyWhenAsked) {
  Harness h = Make(EngineSampling::kAlways);
  RequestSpec asks = h.Spec(TaggedPrompt(0, 4), 2);
  asks.sampling.logprobs = true;
  asks.sampling.top_logprobs = 2;
  const Submitted a = h.Submit(std::move(asks));
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 2);
  const StepPlan& plan = h.scheduler().Schedule();
  const absl::StatusOr<EngineOutput> output = h.Forward(plan);
  ASSERT_TRUE(output.ok()) << output.status();
  const StepTokens& tokens = h.sampler().Sample(plan, output);
  ASSERT_TRUE(tokens.status.ok()) << tokens.status;
  // The fake's row is one-hot: the token's raw logprob is
  // 1 - log(e + vocab - 1); the runner-up is any other id, the lowest
  // first.
  const SampledRow& row_a = tokens.rows[Scheduled(plan, a.id).logits_row];
  ASSERT_TRUE(row_a.status.ok());
  const float expected = 1.0f - std::log(std::exp(1.0f) + (kVocab - 1));
  EXPECT_NEAR(row_a.sample.logprob, expected, 1e-4);
  ASSERT_EQ(row_a.sample.top_logprobs.size(), 2u);
  EXPECT_EQ(row_a.sample.top_logprobs[0].token, row_a.sample.token);
  EXPECT_EQ(row_a.sample.top_logprobs[1].token,
            row_a.sample.token == 0 ? 1 : 0);
  // The plain request went to the engine: a token, no logprobs.
  const SampledRow& row_b = tokens.rows[Scheduled(plan, b.id).logits_row];
  ASSERT_TRUE(row_b.status.ok());
  EXPECT_EQ(row_b.sample.logprob, 0.0f);
  EXPECT_TRUE(row_b.sample.top_logprobs.empty());
  h.scheduler().Update(tokens);
  ASSERT_EQ(a.sink->samples().size(), 1u);
  EXPECT_NEAR(a.sink->samples()[0].logprob, expected, 1e-4);
}

TEST(StepSamplerTest, AnEngineErrorFailsTheWholeStep) {
  Harness h = Make(EngineSampling::kAlways);
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 3);
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 3);
  const StepPlan& plan = h.scheduler().Schedule();
  ASSERT_FALSE(h.sampler().EngineRows(plan).empty());
  const StepTokens& tokens = h.sampler().Sample(
      plan, absl::StatusOr<EngineOutput>(absl::UnavailableError("device")));
  EXPECT_EQ(tokens.status.code(), absl::StatusCode::kUnavailable);
  for (const ScheduledRequest& s : plan.scheduled) {
    EXPECT_EQ(s.request->sampler().step(), 0u);
  }
  h.scheduler().Update(tokens);
  for (const Submitted* s : {&a, &b}) {
    ASSERT_TRUE(s->sink->finished());
    EXPECT_EQ(s->sink->finish().reason, FinishReason::kError);
    EXPECT_EQ(s->sink->finish().status.code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
}

TEST(StepSamplerTest, AShortOutputIsTheEnginesFault) {
  Harness h = Make(EngineSampling::kAlways);
  h.Submit(TaggedPrompt(0, 4), 3);
  const StepPlan& plan = h.scheduler().Schedule();
  ASSERT_EQ(h.sampler().EngineRows(plan).size(), 1u);
  const std::vector<float> logits(kVocab, 0.0f);
  // Engine rows, but no tokens.
  const StepTokens& no_tokens =
      h.sampler().Sample(plan, EngineOutput{logits, {}});
  EXPECT_EQ(no_tokens.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(no_tokens.status.message().find("0 tokens for 1 rows"),
            std::string::npos)
      << no_tokens.status;
  // Fewer logits than rows.
  const StepTokens& short_logits = h.sampler().Sample(
      plan, EngineOutput{absl::MakeConstSpan(logits).first(kVocab - 1), {}});
  EXPECT_EQ(short_logits.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(short_logits.status.message().find("2047 logits for 1 rows"),
            std::string::npos)
      << short_logits.status;
  h.scheduler().Update(short_logits);
  EXPECT_EQ(h.scheduler().num_running(), 0);
}

// A sampled request's tokens depend only on its seed and step: the same
// alone and among others, on the host and in the engine alike.
TEST(StepSamplerTest, DrawsDependOnlyOnSeedAndStep) {
  for (const EngineSampling mode :
       {EngineSampling::kNever, EngineSampling::kAlways}) {
    std::vector<int32_t> outputs[2];
    for (int together = 0; together < 2; ++together) {
      Harness h = Make(mode);
      if (together == 1) h.Submit(TaggedPrompt(1, 7), 5);
      RequestSpec spec = h.Spec(TaggedPrompt(0, 4), 8);
      spec.sampling.temperature = 1.0f;
      spec.sampling.seed = 9;
      const Submitted s = h.Submit(std::move(spec));
      if (together == 1) h.Submit(TaggedPrompt(2, 3), 6);
      h.RunUntilIdle();
      outputs[together] = s.sink->tokens();
    }
    EXPECT_EQ(outputs[0].size(), 8u);
    EXPECT_EQ(outputs[0], outputs[1]) << static_cast<int>(mode);
  }
}

}  // namespace
}  // namespace paceline::scheduler::testing
