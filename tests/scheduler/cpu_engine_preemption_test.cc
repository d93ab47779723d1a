// The scheduler over the real CPU engine and stories260K: several prompts
// run together — chunked, under a KV pool small enough to force preemption
// by recompute — give each the greedy tokens it gets alone, and "Once upon
// a time" gives llama.cpp's reference tokens (../shared/models/README.md).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_source.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::scheduler {
namespace {

const std::string& kStories = ::paceline::testing::kStories260KPath;
const std::vector<int32_t>& kOnceUponATime64 =
    ::paceline::testing::kGreedy64Ids;

class StoriesSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = engine::OpenModel(kStories);
    if (!model.ok()) GTEST_SKIP() << "no test model: " << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<engine::Engine> MakeEngine(int64_t num_blocks) {
    engine::cpu::CpuEngineOptions options;
    options.block_size = 16;
    options.num_blocks = static_cast<int32_t>(num_blocks);
    options.max_tokens_per_step = 64;
    options.num_threads = 1;
    auto engine = engine::cpu::CpuEngine::Create(model_.weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  OfflineRequest Request(const std::string& prompt, int32_t max_tokens) {
    OfflineRequest r;
    r.prompt = model_.tokenizer->Encode(prompt, /*add_bos=*/true);
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    return r;
  }

  engine::LoadedModel model_;
};

TEST_F(StoriesSchedulerTest, GreedyOutputUnderPreemptionEqualsEachAlone) {
  const std::vector<OfflineRequest> requests = {
      Request("Once upon a time", 64),
      Request("Lily and Tom were best friends", 48),
      Request("The little dog", 56),
      Request("One day, a big bear came to the park", 40),
  };
  std::vector<OfflineResult> alone;
  for (const OfflineRequest& r : requests) {
    auto result = RunOffline(MakeEngine(KvBlocksToRunTogether({r}, 16)),
                             *model_.tokenizer, {r}, OfflineOptions());
    ASSERT_TRUE(result.ok()) << result.status();
    alone.push_back((*result)[0]);
  }
  ASSERT_EQ(alone[0].tokens, kOnceUponATime64);

  // 5 blocks hold the longest request alone; the four need 17 together.
  ASSERT_EQ(KvBlocksToRunTogether(requests, 16), 17);
  OfflineStats stats;
  auto together =
      RunOffline(MakeEngine(5), *model_.tokenizer, requests,
                 OfflineOptions{/*max_batched_tokens=*/8, 8}, &stats);
  ASSERT_TRUE(together.ok()) << together.status();
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*together)[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ((*together)[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ((*together)[i].finish.reason, alone[i].finish.reason);
  }
}

// Rows sampled in the engine (EngineSampling::kAlways; the CPU engine
// samples after Forward by row_sampling.h's rule): greedy still gives
// llama.cpp's tokens, and seeded sampled requests run together under
// preemption give the tokens each gets alone.
TEST_F(StoriesSchedulerTest,
       EngineSampledOutputUnderPreemptionEqualsEachAlone) {
  std::vector<OfflineRequest> requests = {
      Request("Once upon a time", 64),
      Request("Lily and Tom were best friends", 48),
      Request("The little dog", 56),
      Request("One day, a big bear came to the park", 40),
  };
  const float temperatures[] = {0.0f, 0.8f, 1.0f, 1.2f};
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].sampling.temperature = temperatures[i];
    requests[i].sampling.top_k = i == 2 ? 20 : 0;
    requests[i].sampling.top_p = i == 3 ? 0.9f : 1.0f;
    requests[i].sampling.min_p = i == 1 ? 0.05f : 0.0f;
    requests[i].sampling.seed = 1000 + i;
  }
  OfflineOptions options;
  options.engine_sampling = EngineSampling::kAlways;
  std::vector<OfflineResult> alone;
  for (const OfflineRequest& r : requests) {
    auto result = RunOffline(MakeEngine(KvBlocksToRunTogether({r}, 16)),
                             *model_.tokenizer, {r}, options);
    ASSERT_TRUE(result.ok()) << result.status();
    alone.push_back((*result)[0]);
  }
  ASSERT_EQ(alone[0].tokens, kOnceUponATime64);

  options.max_batched_tokens = 8;
  options.max_running = 8;
  OfflineStats stats;
  auto together =
      RunOffline(MakeEngine(5), *model_.tokenizer, requests, options, &stats);
  ASSERT_TRUE(together.ok()) << together.status();
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*together)[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ((*together)[i].finish.reason, alone[i].finish.reason);
  }
}

}  // namespace
}  // namespace paceline::scheduler
