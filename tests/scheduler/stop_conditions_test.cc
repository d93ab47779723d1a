// Stop conditions checked on the engine thread right after sampling: EOS
// unless ignored, stop token ids, max_tokens; and a stop string the
// delivery side found (StopAtString): the request ends one step late with
// kStop, the string, and usage counting the tokens its text took. (Matching
// stop strings on the text is TextOutput's: tests/engine/
// text_output_test.cc.)

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int32_t kPromptLength = 2;

// Each tag's request generates the bytes of its string, one token each,
// then EOS forever.
FakeEngineOptions Scripted(std::vector<std::string> outputs) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 4;
  o.num_blocks = 256;
  o.script = [outputs](absl::Span<const int32_t> context) -> int32_t {
    const std::string& out = outputs[context[0] - kFirstTag];
    const size_t i = context.size() - kPromptLength;
    return i < out.size() ? static_cast<uint8_t>(out[i]) : kEos;
  };
  return o;
}

struct Output {
  std::vector<int32_t> tokens;
  FinishInfo finish;
  int32_t deltas = 0;
};

Output Generate(const std::string& output, StopConditions stop) {
  Harness h(Scripted({output}), Opts(0, 4));
  RequestSpec spec = h.Spec(TaggedPrompt(0, kPromptLength), stop.max_tokens);
  spec.stop = std::move(stop);
  const Submitted s = h.Submit(std::move(spec));
  h.RunUntilIdle();
  EXPECT_TRUE(s.sink->finished());
  return Output{s.sink->tokens(), s.sink->finish(), s.sink->num_deltas()};
}

std::vector<int32_t> Bytes(const std::string& s) {
  std::vector<int32_t> v;
  for (char c : s) v.push_back(static_cast<uint8_t>(c));
  return v;
}

TEST(StopConditionsTest, EveryTokenIsHandedOverAsAnIdOnly) {
  const Output r = Generate("hello", Stop(50));
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);  // EOS after "hello"
  EXPECT_EQ(r.tokens, Bytes("hello"));
  EXPECT_EQ(r.deltas, 5);
  EXPECT_EQ(r.finish.usage.completion_tokens, 6);  // EOS counts
}

TEST(StopConditionsTest, MaxTokensEndsWithLength) {
  const Output r = Generate("abcab", Stop(4));
  EXPECT_EQ(r.finish.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens, Bytes("abca"));
  EXPECT_EQ(r.finish.stop_string, "");
}

TEST(StopConditionsTest, AStopStringFoundByDeliveryEndsTheRequestThere) {
  Harness h(Scripted({"hello world, more and more"}), Opts(0, 4));
  const Submitted s = h.Submit(TaggedPrompt(0, kPromptLength), 50);
  for (int i = 0; i < 9; ++i) h.Step();  // "hello wor": a prefill + 8 decodes
  ASSERT_FALSE(s.sink->finished());
  // Delivery found "o w" in the text of the first 7 tokens ("hello w"),
  // two steps later.
  ASSERT_TRUE(h.scheduler().StopAtString(s.id, "o w", 7).ok());
  ASSERT_TRUE(s.sink->finished());
  const FinishInfo f = s.sink->finish();
  EXPECT_EQ(f.reason, FinishReason::kStop);
  EXPECT_TRUE(f.status.ok());
  EXPECT_EQ(f.stop_string, "o w");
  EXPECT_EQ(f.stop_token, -1);
  EXPECT_EQ(f.usage.completion_tokens, 7);  // not the 9 generated
  EXPECT_EQ(
      h.scheduler().counters().finished[static_cast<int>(FinishReason::kStop)],
      1);
  // Its slot and blocks are free: a finished request is not live.
  EXPECT_EQ(h.scheduler().StopAtString(s.id, "o w", 7).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(h.scheduler().num_running(), 0);
}

TEST(StopConditionsTest, EosUnlessIgnoredAndStopTokenIds) {
  StopConditions ignore = Stop(5);
  ignore.ignore_eos = true;
  Output r = Generate("ab", ignore);
  EXPECT_EQ(r.finish.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{'a', 'b', kEos, kEos, kEos}));
  StopConditions ids = Stop(10);
  ids.stop_token_ids = {'c'};
  r = Generate("abcd", ids);
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);
  EXPECT_EQ(r.finish.stop_token, 'c');
  EXPECT_EQ(r.tokens, Bytes("ab"));
}

TEST(StopConditionsTest, StoppedRequestFreesItsSlotForTheNextStep) {
  Harness h(Scripted({"ab", "xyzxyzxyz"}),
            Opts(64, 1));
  const Submitted a = h.Submit(TaggedPrompt(0, kPromptLength), 50);
  const Submitted b = h.Submit(TaggedPrompt(1, kPromptLength), 50);
  h.Step();
  h.Step();
  h.Step();  // EOS
  EXPECT_TRUE(a.sink->finished());
  h.Step();
  EXPECT_EQ(TagOf(h.steps().back().slices[0]), 1);
  EXPECT_EQ(h.scheduler().counters().finished[static_cast<int>(FinishReason::kStop)], 1);
}

TEST(StopConditionsTest, LogprobsComeWithTheTokens) {
  Harness h(Scripted({"abc"}), Opts(0, 4));
  RequestSpec spec = h.Spec(TaggedPrompt(0, kPromptLength), 3);
  spec.sampling.logprobs = true;
  spec.sampling.top_logprobs = 2;
  const Submitted s = h.Submit(std::move(spec));
  h.RunUntilIdle();
  const std::vector<engine::SampleResult> samples = s.sink->samples();
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].token, 'a');
  EXPECT_EQ(samples[0].top_logprobs.size(), 2u);
}

}  // namespace
}  // namespace paceline::scheduler::testing
