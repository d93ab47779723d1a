// Speculative decoding over the real CPU engine and stories260K: the
// engine's rows for a drafted slice are the rows the same tokens get one
// step at a time, so greedy output is llama.cpp's reference (and the same
// as without drafts), and seeded sampled output is the same as without
// drafts; the model's repetitive stories accept drafts.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/forward_batch.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::scheduler {
namespace {

using ::paceline::testing::HaveStories260K;
using ::paceline::testing::kGreedy64Ids;
using ::paceline::testing::kOnceUponATimePrompt;
using ::paceline::testing::kStories260KPath;

class StoriesSpeculationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) {
      GTEST_SKIP() << "no test model at " << kStories260KPath;
    }
    auto model = engine::OpenModel(kStories260KPath);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<engine::cpu::CpuEngine> MakeEngine() {
    engine::cpu::CpuEngineOptions options;
    options.block_size = 16;
    options.num_blocks = 256;
    options.max_tokens_per_step = 64;
    options.num_threads = 1;
    auto engine = engine::cpu::CpuEngine::Create(model_.weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  std::vector<OfflineResult> Run(std::vector<OfflineRequest> requests,
                                 int32_t drafts) {
    for (OfflineRequest& r : requests) r.max_draft_tokens = drafts;
    auto results =
        RunOffline(MakeEngine(), *model_.tokenizer, std::move(requests), {});
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *std::move(results) : std::vector<OfflineResult>{};
  }

  std::vector<OfflineRequest> Stories(float temperature, int32_t max_tokens) {
    std::vector<OfflineRequest> out;
    for (const char* text : {"Once upon a time", "The little dog",
                             "Lily and Ben went to the park"}) {
      OfflineRequest r;
      r.prompt = model_.tokenizer->Encode(text, true);
      r.sampling.temperature = temperature;
      r.sampling.seed = 11 + out.size();
      r.stop.max_tokens = max_tokens;
      out.push_back(std::move(r));
    }
    return out;
  }

  engine::LoadedModel model_;
};

TEST_F(StoriesSpeculationTest, ADraftedSlicesRowsAreTheOneByOneRows) {
  // The prompt, then the 64 reference tokens: once one token a step, once
  // as one slice asking for a row per token.
  std::vector<int32_t> tokens = kOnceUponATimePrompt;
  tokens.insert(tokens.end(), kGreedy64Ids.begin(), kGreedy64Ids.end());
  const int32_t n_prompt = static_cast<int32_t>(kOnceUponATimePrompt.size());
  const int32_t n = 16;  // tokens checked after the prompt
  const size_t vocab = static_cast<size_t>(model_.weights->config().n_vocab);
  std::vector<int32_t> table(8);
  for (int32_t i = 0; i < 8; ++i) table[i] = i;

  auto one_by_one = MakeEngine();
  std::vector<float> want(n * vocab), row(vocab);
  for (int32_t p = 0; p < n_prompt + n; ++p) {
    engine::ForwardBatch b;
    b.tokens = {tokens[p]};
    b.sequences.push_back(engine::SequenceSlice{.token_begin = 0,
                                                .token_count = 1,
                                                .position_begin = p,
                                                .block_table = table,
                                                .num_logits = 1});
    ASSERT_TRUE(one_by_one->Forward(b, absl::MakeSpan(row)).ok());
    if (p >= n_prompt) {
      std::copy(row.begin(), row.end(), want.begin() + (p - n_prompt) * vocab);
    }
  }
  auto drafted = MakeEngine();
  engine::ForwardBatch prompt;
  prompt.tokens.assign(tokens.begin(), tokens.begin() + n_prompt);
  prompt.sequences.push_back(engine::SequenceSlice{.token_begin = 0,
                                                   .token_count = n_prompt,
                                                   .position_begin = 0,
                                                   .block_table = table,
                                                   .num_logits = 0});
  ASSERT_TRUE(drafted->Forward(prompt, {}).ok());
  engine::ForwardBatch slice;
  slice.tokens.assign(tokens.begin() + n_prompt, tokens.begin() + n_prompt + n);
  slice.sequences.push_back(engine::SequenceSlice{.token_begin = 0,
                                                  .token_count = n,
                                                  .position_begin = n_prompt,
                                                  .block_table = table,
                                                  .num_logits = n});
  std::vector<float> got(n * vocab);
  ASSERT_TRUE(drafted->Forward(slice, absl::MakeSpan(got)).ok());
  for (int32_t i = 0; i < n; ++i) {
    for (size_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(got[i * vocab + v], want[i * vocab + v])
          << "row " << i << " token " << v;
    }
  }
}

TEST_F(StoriesSpeculationTest, GreedyOutputIsLlamaCppsAndUnchanged) {
  OfflineRequest once;
  once.prompt = kOnceUponATimePrompt;
  once.sampling.temperature = 0;
  once.stop.max_tokens = 64;
  once.stop.ignore_eos = true;
  const std::vector<OfflineResult> reference = Run({once}, 4);
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_EQ(reference[0].tokens, kGreedy64Ids);

  const std::vector<OfflineResult> plain = Run(Stories(0, 200), 0);
  const std::vector<OfflineResult> spec = Run(Stories(0, 200), 4);
  ASSERT_EQ(spec.size(), plain.size());
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << i;
    drafted += spec[i].finish.usage.draft_tokens;
    accepted += spec[i].finish.usage.accepted_draft_tokens;
  }
  // Stories260K repeats itself: some drafts are right.
  EXPECT_GT(accepted, 0) << drafted << " drafted";
}

TEST_F(StoriesSpeculationTest, SeededSampledOutputIsUnchanged) {
  const std::vector<OfflineResult> plain = Run(Stories(0.8f, 160), 0);
  const std::vector<OfflineResult> spec = Run(Stories(0.8f, 160), 6);
  ASSERT_EQ(spec.size(), plain.size());
  int64_t drafted = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << i;
    drafted += spec[i].finish.usage.draft_tokens;
  }
  EXPECT_GT(drafted, 0);
}

}  // namespace
}  // namespace paceline::scheduler
