// Stop conditions checked right after sampling: stop strings matched on
// the detokenized text across token boundaries (held back until ruled out,
// reported, delivered only when asked), EOS unless ignored, stop token ids,
// max_tokens; UTF-8 split across byte tokens.

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
  std::string text;
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
  return Output{s.sink->text(), s.sink->tokens(), s.sink->finish(),
             s.sink->num_deltas()};
}

std::vector<int32_t> Bytes(const std::string& s) {
  std::vector<int32_t> v;
  for (char c : s) v.push_back(static_cast<uint8_t>(c));
  return v;
}

TEST(StopConditionsTest, StopStringSplitAcrossTokensEndsTheSameStep) {
  const Output r = Generate("hello world, more", Stop(50, {"o w"}));
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);
  EXPECT_EQ(r.finish.stop_string, "o w");
  EXPECT_EQ(r.text, "hell");
  // "o", " ", "w" are delivered as ids; the step of "w" is the last.
  EXPECT_EQ(r.tokens, Bytes("hello w"));
  EXPECT_EQ(r.finish.usage.completion_tokens, 7);
  EXPECT_EQ(r.deltas, 7);
}

TEST(StopConditionsTest, IncludeStopStringDeliversIt) {
  const Output r = Generate("hello world", Stop(50, {"o w"}, true));
  EXPECT_EQ(r.text, "hello w");
  EXPECT_EQ(r.finish.stop_string, "o w");
}

TEST(StopConditionsTest, HeldBackTextIsReleasedWhenTheMatchFails) {
  // "wor" could start "work"; "l" rules it out. EOS then ends the request.
  const Output r = Generate("a world", Stop(50, {"work"}));
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);
  EXPECT_EQ(r.finish.stop_token, kEos);
  EXPECT_EQ(r.finish.stop_string, "");
  EXPECT_EQ(r.text, "a world");
  EXPECT_EQ(r.tokens, Bytes("a world"));  // EOS is not delivered
  EXPECT_EQ(r.finish.usage.completion_tokens, 8);
}

TEST(StopConditionsTest, EarliestOfSeveralStopStringsWins) {
  const Output r = Generate("abcdef", Stop(50, {"def", "bc", "cdefg"}));
  EXPECT_EQ(r.finish.stop_string, "bc");
  EXPECT_EQ(r.text, "a");
}

TEST(StopConditionsTest, HeldTextIsFlushedAtMaxTokensAndAtEos) {
  Output r = Generate("abcab", Stop(4, {"abd"}));
  EXPECT_EQ(r.finish.reason, FinishReason::kLength);
  EXPECT_EQ(r.text, "abca");
  r = Generate("xab", Stop(10, {"abd"}));
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);
  EXPECT_EQ(r.text, "xab");
  EXPECT_EQ(r.deltas, 4);  // x, a, b, then the flush with no id
}

TEST(StopConditionsTest, Utf8SplitAcrossByteTokens) {
  // "café!" — é is two bytes, two tokens: no text until both arrive.
  Output r = Generate("caf\xc3\xa9!", Stop(50, {"\xc3\xa9"}));
  EXPECT_EQ(r.finish.stop_string, "\xc3\xa9");
  EXPECT_EQ(r.text, "caf");
  EXPECT_EQ(r.tokens.size(), 5u);
  r = Generate("caf\xc3\xa9", Stop(4));  // cut inside é
  EXPECT_EQ(r.finish.reason, FinishReason::kLength);
  EXPECT_EQ(r.text, "caf\xef\xbf\xbd");  // U+FFFD for the dangling byte
}

TEST(StopConditionsTest, EosUnlessIgnoredAndStopTokenIds) {
  StopConditions ignore = Stop(5);
  ignore.ignore_eos = true;
  Output r = Generate("ab", ignore);
  EXPECT_EQ(r.finish.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{'a', 'b', kEos, kEos, kEos}));
  EXPECT_EQ(r.text, "ab");  // EOS has no text
  StopConditions ids = Stop(10);
  ids.stop_token_ids = {'c'};
  r = Generate("abcd", ids);
  EXPECT_EQ(r.finish.reason, FinishReason::kStop);
  EXPECT_EQ(r.finish.stop_token, 'c');
  EXPECT_EQ(r.tokens, Bytes("ab"));
  EXPECT_EQ(r.text, "ab");
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
