// A generation ends on any end-of-generation token of the model's
// vocabulary (Tokenizer::IsEog), not only on EOS: the file's
// tokenizer.ggml.eot_token_id and the named end-of-turn texts, as a chat
// model ends its turn. The vocabulary is a GGUF built in the test.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/gguf/gguf_file.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "scheduler/request.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

using ::paceline::testing::GgufBuilder;
using ::paceline::testing::I32Array;
using ::paceline::testing::Str;
using ::paceline::testing::StrArray;
using ::paceline::testing::U32;

constexpr int32_t kA = 3;
constexpr int32_t kTurnOver = 4;  // tokenizer.ggml.eot_token_id
constexpr int32_t kImEnd = 5;     // "<|im_end|>", typed normal

std::unique_ptr<engine::Tokenizer> Vocab(std::string* bytes) {
  GgufBuilder b;
  b.Add("tokenizer.ggml.model", Str("llama"));
  b.Add("tokenizer.ggml.tokens",
        StrArray({"<unk>", "<s>", "</s>", "a", "<turn_over>", "<|im_end|>"}));
  b.Add("tokenizer.ggml.token_type", I32Array({2, 3, 3, 1, 3, 1}));
  b.Add("tokenizer.ggml.eot_token_id", U32(kTurnOver));
  *bytes = b.Build();
  auto file = engine::GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto t = engine::Tokenizer::FromGguf(**file);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

// What a request does with `token` as its next sample.
std::optional<FinishReason> Accept(const engine::Tokenizer& tokenizer,
                                   int32_t token, bool ignore_eos = false) {
  RequestSpec spec;
  spec.tenant = "t";
  spec.prompt = {1, kA};
  spec.stop.max_tokens = 10;
  spec.stop.ignore_eos = ignore_eos;
  spec.sink = std::make_shared<CollectingSink>();
  auto sampler = engine::SequenceSampler::Create(
      spec.sampling, tokenizer.vocab_size(), spec.prompt);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  Request request(1, std::move(spec), 0, 0, absl::UnixEpoch(),
                  *std::move(sampler), &tokenizer);
  engine::SampleResult sample;
  sample.token = token;
  return request.AcceptSample(sample, absl::UnixEpoch());
}

TEST(EndOfTurnTest, AnyEndOfGenerationTokenStops) {
  std::string bytes;
  const auto tokenizer = Vocab(&bytes);
  ASSERT_NE(tokenizer, nullptr);
  for (int32_t token : {2, kTurnOver, kImEnd}) {
    EXPECT_EQ(Accept(*tokenizer, token), FinishReason::kStop) << token;
    EXPECT_EQ(Accept(*tokenizer, token, /*ignore_eos=*/true), std::nullopt)
        << token;
  }
  EXPECT_EQ(Accept(*tokenizer, kA), std::nullopt);
  EXPECT_EQ(Accept(*tokenizer, 1), std::nullopt);  // BOS is not an end
}

}  // namespace
}  // namespace paceline::scheduler::testing
