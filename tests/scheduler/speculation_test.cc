// Speculative decoding in the scheduler over the fake engine
// (scheduler.h, Speculative decoding): the output is the same token for
// token as without drafts, greedy and sampled, while steps carry drafts;
// drafts ride only on small steps, stop at max_tokens and at a stop, take
// no block they cannot spare, and leave no block behind; and the rule's
// statistics over a fixed set of seeds: a draft token x is accepted with
// the model's probability p(x), and a rejected step's token follows the
// residual distribution (p without x, renormalized).

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int32_t kVocab = 300;  // bytes, BOS, EOS, fillers
constexpr size_t kPeriod = 7;

uint64_t Hash(absl::Span<const int32_t> context) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context)
    h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return h;
}

// Mostly periodic: the token kPeriod back, except where a hash of the
// whole context (as the engine reads it from the KV slots) says otherwise.
// So drafts are often right and sometimes wrong, and K/V left behind by a
// rejected draft would change what follows.
int32_t MostlyPeriodic(absl::Span<const int32_t> context) {
  const uint64_t h = Hash(context);
  if (context.size() < kPeriod || h % 5 == 0) {
    return 'a' + static_cast<int32_t>(h % 26);
  }
  return context[context.size() - kPeriod];
}

FakeEngineOptions Engine(int32_t num_blocks = 256) {
  FakeEngineOptions o;
  o.n_vocab = kVocab;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  o.script = MostlyPeriodic;
  return o;
}

SchedulerOptions Options(int32_t max_step_tokens, int32_t max_batched = 64,
                         int32_t max_running = 16) {
  SchedulerOptions o = Opts(max_batched, max_running);
  o.speculation_max_step_tokens = max_step_tokens;
  return o;
}

std::vector<int32_t> Repeated(absl::string_view cycle, int times) {
  std::vector<int32_t> p;
  for (int i = 0; i < times; ++i) {
    for (char c : cycle) p.push_back(static_cast<unsigned char>(c));
  }
  return p;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishInfo finish;
};

// Runs `specs` (max_draft_tokens as given) to the end; returns each one's
// outcome and the steps taken.
std::vector<Outcome> RunAll(Harness& h, std::vector<RequestSpec> specs,
                            int64_t* steps) {
  std::vector<Submitted> submitted;
  for (RequestSpec& spec : specs)
    submitted.push_back(h.Submit(std::move(spec)));
  *steps = h.RunUntilIdle();
  std::vector<Outcome> out;
  for (const Submitted& s : submitted) {
    EXPECT_TRUE(s.sink->finished());
    if (s.sink->finished()) {
      EXPECT_TRUE(s.sink->finish().status.ok()) << s.sink->finish().status;
    }
    out.push_back({s.sink->tokens(), TextOf(h.tokenizer(), s.sink->tokens()),
                   s.sink->finish()});
  }
  const kvpager::PagerStats stats = h.scheduler().pager().Stats();
  EXPECT_EQ(stats.used_blocks, 0) << "a block outlived its request";
  EXPECT_TRUE(h.scheduler().pager().CheckConsistency().ok());
  return out;
}

std::vector<RequestSpec> Mix(Harness& h, int32_t drafts, float temperature) {
  std::vector<RequestSpec> specs;
  const char* cycles[] = {"pqrstuv", "abcdefg", "hijklmn", "opqxyzw"};
  for (int i = 0; i < 4; ++i) {
    RequestSpec spec = h.Spec(Repeated(cycles[i], 2 + i % 2), 40 + 9 * i);
    spec.max_draft_tokens = drafts;
    spec.sampling.temperature = temperature;
    spec.sampling.seed = 7 + static_cast<uint64_t>(i);
    spec.stop.ignore_eos = true;
    if (i == 3) spec.stop.stop_token_ids = {'w'};
    specs.push_back(std::move(spec));
  }
  return specs;
}

void ExpectSameOutput(float temperature) {
  Harness plain(Engine(), Options(16));
  Harness spec(Engine(), Options(16));
  int64_t plain_steps = 0, spec_steps = 0;
  const std::vector<Outcome> want =
      RunAll(plain, Mix(plain, 0, temperature), &plain_steps);
  const std::vector<Outcome> got =
      RunAll(spec, Mix(spec, 4, temperature), &spec_steps);
  ASSERT_EQ(got.size(), want.size());
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].tokens, want[i].tokens);
    EXPECT_EQ(got[i].text, want[i].text);
    EXPECT_EQ(got[i].finish.reason, want[i].finish.reason);
    EXPECT_EQ(got[i].finish.usage.completion_tokens,
              want[i].finish.usage.completion_tokens);
    EXPECT_EQ(want[i].finish.usage.draft_tokens, 0);
    drafted += got[i].finish.usage.draft_tokens;
    accepted += got[i].finish.usage.accepted_draft_tokens;
  }
  // The mix exercises both verdicts, and drafts save steps.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(drafted, accepted);
  EXPECT_LT(spec_steps, plain_steps);
}

TEST(SpeculationTest, GreedyOutputIsTheSameAsWithoutDrafts) {
  ExpectSameOutput(0.0f);
}

TEST(SpeculationTest, SampledOutputIsTheSameAsWithoutDrafts) {
  // The fake engine's rows are one-hot (1 at its token, 0 elsewhere): at
  // T = 0.15 its token has p ~ 0.9, so drafts are mostly accepted and the
  // draws still matter.
  ExpectSameOutput(0.15f);
}

TEST(SpeculationTest, EngineSamplingLeavesADraftsRowsToTheHost) {
  // With the engine sampling every row it may (a GPU's mode), a drafted
  // request's rows still come back as logits and are sampled in order on
  // the host; the output is the same as with host sampling throughout.
  Harness host(Engine(), Options(16), nullptr, EngineSampling::kNever);
  Harness engine(Engine(), Options(16), nullptr, EngineSampling::kAlways);
  int64_t host_steps = 0, engine_steps = 0;
  const std::vector<Outcome> want =
      RunAll(host, Mix(host, 4, 0.15f), &host_steps);
  const std::vector<Outcome> got =
      RunAll(engine, Mix(engine, 4, 0.15f), &engine_steps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
    EXPECT_EQ(got[i].finish.usage.accepted_draft_tokens,
              want[i].finish.usage.accepted_draft_tokens)
        << i;
  }
  EXPECT_EQ(engine_steps, host_steps);
}

TEST(SpeculationTest, ADraftedSliceAsksForARowPerToken) {
  Harness h(Engine(), Options(16));
  RequestSpec spec = h.Spec(Repeated("pqrstuv", 2), 30);
  spec.max_draft_tokens = 3;
  spec.stop.ignore_eos = true;
  h.Submit(std::move(spec));
  int drafted_steps = 0;
  while (h.scheduler().HasRunnable()) {
    const StepPlan& plan = h.Step();
    ASSERT_EQ(plan.scheduled.size(), 1u);
    const ScheduledRequest& s = plan.scheduled[0];
    const engine::SequenceSlice& slice = plan.batch.sequences[0];
    EXPECT_LE(s.num_draft, 3);
    EXPECT_EQ(slice.token_count, s.num_tokens);
    EXPECT_EQ(slice.num_logits, 1 + s.num_draft);
    EXPECT_EQ(plan.num_logit_rows, slice.num_logits);
    drafted_steps += s.num_draft > 0 ? 1 : 0;
  }
  EXPECT_GT(drafted_steps, 0);
}

TEST(SpeculationTest, DraftsRideOnlyOnSmallSteps) {
  // A cap of 8 tokens: a step with a draft holds at most 8 tokens, so ten
  // requests decoding together draft nothing.
  Harness h(Engine(), Options(8));
  for (int i = 0; i < 10; ++i) {
    RequestSpec spec = h.Spec(Repeated("pqrstuv", 2), 24);
    spec.prompt[0] = 'A' + i;  // no shared prefix
    spec.max_draft_tokens = 4;
    spec.stop.ignore_eos = true;
    h.Submit(std::move(spec));
  }
  h.RunUntilIdle();
  int steps_of_ten = 0;
  for (const RecordedStep& step : h.steps()) {
    bool drafted = false;
    for (const RecordedSlice& s : step.slices) drafted |= s.num_logits > 1;
    if (drafted) {
      EXPECT_LE(step.tokens.size(), 8u);
    }
    if (step.slices.size() == 10) {
      ++steps_of_ten;
      EXPECT_FALSE(drafted);
    }
  }
  EXPECT_GT(steps_of_ten, 10);
  // Alone, the same request drafts, and its steps stay within the cap.
  Harness alone(Engine(), Options(8));
  RequestSpec spec = alone.Spec(Repeated("pqrstuv", 2), 24);
  spec.max_draft_tokens = 16;
  spec.stop.ignore_eos = true;
  const Submitted one = alone.Submit(std::move(spec));
  alone.RunUntilIdle();
  EXPECT_GT(one.sink->finish().usage.draft_tokens, 0);
  for (size_t i = 1; i < alone.steps().size(); ++i) {  // after the prompt
    EXPECT_LE(alone.steps()[i].tokens.size(), 8u);
  }
}

TEST(SpeculationTest, NoDraftPastMaxTokens) {
  // A period of 1 is always drafted right: every step runs as many drafts
  // as max_tokens leaves room for, and the request ends at exactly 10.
  FakeEngineOptions engine = Engine();
  engine.script = [](absl::Span<const int32_t> c) { return c.back(); };
  Harness h(std::move(engine), Options(64));
  RequestSpec spec = h.Spec(Repeated("zz", 4), 10);
  spec.max_draft_tokens = 4;
  spec.stop.ignore_eos = true;
  const Submitted r = h.Submit(std::move(spec));
  h.RunUntilIdle();
  EXPECT_EQ(r.sink->tokens(), std::vector<int32_t>(10, 'z'));
  EXPECT_EQ(r.sink->finish().reason, FinishReason::kLength);
  // Prompt (1 token sampled), then 1 + 4, then 1 + 3 (the 10th is the last).
  ASSERT_EQ(h.steps().size(), 3u);
  EXPECT_EQ(h.steps()[1].slices[0].num_logits, 5);
  EXPECT_EQ(h.steps()[2].slices[0].num_logits, 4);
  EXPECT_EQ(r.sink->finish().usage.draft_tokens, 7);
  EXPECT_EQ(r.sink->finish().usage.accepted_draft_tokens, 7);
}

TEST(SpeculationTest, AStopInsideTheAcceptedDraftsEndsThere) {
  FakeEngineOptions engine = Engine();
  engine.script = [](absl::Span<const int32_t> c) {
    return c[c.size() - 3];  // period 3
  };
  Harness h(std::move(engine), Options(64));
  RequestSpec spec = h.Spec(Repeated("xyz", 2), 7);
  spec.max_draft_tokens = 8;
  spec.stop.ignore_eos = true;
  const Submitted r = h.Submit(std::move(spec));
  h.RunUntilIdle();
  // Output x y z x y z x: max_tokens ends it at the 7th token, inside a
  // step's accepted drafts; the drafts after it were never delivered.
  EXPECT_EQ(r.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(r.sink->tokens().size(), 7u);
  EXPECT_EQ(r.sink->finish().usage.completion_tokens, 7);
  EXPECT_GT(r.sink->finish().usage.accepted_draft_tokens, 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
}

TEST(SpeculationTest, ADraftTakesOnlyFreeSlotsAndBlocks) {
  // 5 blocks of 4. A finished 12-token prompt leaves 3 blocks in the
  // prefix cache; the drafting request's 6-token prompt takes the other 2.
  // Its first decode token lands at position 6, so a draft has one slot
  // left in its block and no free block: it drafts one token, evicting
  // nothing (only its own growth may evict a cached block later).
  FakeEngineOptions engine = Engine(5);
  engine.script = [](absl::Span<const int32_t> c) { return c[c.size() - 3]; };
  Harness h(std::move(engine), Options(64));
  RequestSpec filler = h.Spec(Repeated("klmn", 3), 1);
  h.Submit(std::move(filler));
  h.RunUntilIdle();
  ASSERT_EQ(h.scheduler().pager().Stats().cached_blocks, 3);
  RequestSpec spec = h.Spec(Repeated("xyz", 2), 6);
  spec.max_draft_tokens = 8;
  spec.stop.ignore_eos = true;
  const Submitted r = h.Submit(std::move(spec));
  h.Step();  // the prompt
  const StepPlan& plan = h.Step();
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].num_draft, 1);
  EXPECT_EQ(h.scheduler().pager().Stats().evictions, 0);
  h.RunUntilIdle();
  EXPECT_EQ(r.sink->tokens(),
            (std::vector<int32_t>{'x', 'y', 'z', 'x', 'y', 'z'}));
  EXPECT_EQ(h.scheduler().counters().preemptions, 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
}

TEST(SpeculationTest, MaxDraftTokensIsChecked) {
  Harness h(Engine(), Options(16));
  RequestSpec spec = h.Spec(Repeated("ab", 2), 4);
  spec.max_draft_tokens = kMaxDraftTokens + 1;
  EXPECT_EQ(h.scheduler().CheckRequest(spec).code(),
            absl::StatusCode::kInvalidArgument);
  spec.max_draft_tokens = -1;
  EXPECT_EQ(h.scheduler().CheckRequest(spec).code(),
            absl::StatusCode::kInvalidArgument);
}

// The rule's statistics. The fake engine's row for a context is 1 at its
// token y and 0 elsewhere, so at temperature T the model's distribution is
// p(y) = e^(1/T) / (e^(1/T) + V - 1), and 1 / (e^(1/T) + V - 1) for each
// other token. A prompt "... a b c a b" drafts c; the script's token is c
// too, so a draft is accepted with probability p(c), and on a rejection
// the step's token must follow the residual: uniform over the V - 1 others.
TEST(SpeculationTest, AcceptanceAndResidualFollowTheModelOverFixedSeeds) {
  constexpr float kT = 0.25f;
  constexpr int kSeeds = 4000;
  FakeEngineOptions engine = Engine();
  engine.script = [](absl::Span<const int32_t> c) { return c[c.size() - 3]; };
  const double e = std::exp(1.0 / kT);
  const double p = e / (e + kVocab - 1);
  int accepted = 0;
  std::map<int32_t, int> rejected;  // token -> count
  Harness h(engine, Options(16));
  for (int seed = 0; seed < kSeeds; ++seed) {
    // Prompt "q a b c a": when its first token is b (probability p), the
    // first decode step drafts c.
    RequestSpec spec = h.Spec({'q', 'a', 'b', 'c', 'a'}, 3);
    spec.max_draft_tokens = 1;
    spec.stop.ignore_eos = true;
    spec.sampling.temperature = kT;
    spec.sampling.seed = static_cast<uint64_t>(seed);
    const Submitted r = h.Submit(std::move(spec));
    h.Step();  // the prompt: samples the first token
    if (r.sink->tokens() != std::vector<int32_t>{'b'}) {
      h.RunUntilIdle();
      continue;
    }
    const StepPlan& plan = h.Step();
    ASSERT_EQ(plan.scheduled.size(), 1u);
    ASSERT_EQ(plan.scheduled[0].num_draft, 1) << "seed " << seed;
    const std::vector<int32_t> tokens = r.sink->tokens();
    ASSERT_GE(tokens.size(), 2u);
    // Accepted: c and the token after it, from the draft's row.
    ASSERT_EQ(tokens.size(), tokens[1] == 'c' ? 3u : 2u);
    if (tokens[1] == 'c') {
      ++accepted;
    } else {
      ++rejected[tokens[1]];
    }
    h.RunUntilIdle();
    ASSERT_TRUE(r.sink->finished());
    EXPECT_EQ(r.sink->finish().usage.accepted_draft_tokens,
              tokens[1] == 'c' ? 1 : 0);
  }
  const int trials = accepted + [&] {
    int n = 0;
    for (const auto& [t, c] : rejected) n += c;
    return n;
  }();
  ASSERT_GT(trials, 300);  // the first token is 'b' with probability p
  // Acceptance: within 4.5 standard deviations of p.
  const double sd = std::sqrt(p * (1 - p) / trials);
  EXPECT_NEAR(static_cast<double>(accepted) / trials, p, 4.5 * sd)
      << accepted << " of " << trials;
  // Residual: never the draft token, and uniform over the rest — checked
  // in 10 groups of token ids (chi-square, 9 degrees of freedom; 27.9 is
  // its 0.999 quantile).
  EXPECT_EQ(rejected.count('c'), 0u);
  const int rejects = trials - accepted;
  std::vector<double> observed(10, 0), expected(10, 0);
  for (int32_t t = 0; t < kVocab; ++t) {
    if (t == 'c') continue;
    expected[t % 10] += static_cast<double>(rejects) / (kVocab - 1);
    const auto it = rejected.find(t);
    if (it != rejected.end()) observed[t % 10] += it->second;
  }
  double chi2 = 0;
  for (int g = 0; g < 10; ++g) {
    chi2 +=
        (observed[g] - expected[g]) * (observed[g] - expected[g]) / expected[g];
  }
  EXPECT_LT(chi2, 27.9);
}

}  // namespace
}  // namespace paceline::scheduler::testing
