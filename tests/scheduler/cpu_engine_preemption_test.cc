// The scheduler over the real CPU engine and stories260K: several prompts
// run together — chunked, under a KV pool small enough to force preemption
// by recompute — give each the greedy tokens it gets alone, and "Once upon
// a time" gives llama.cpp's reference tokens (../shared/models/README.md).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
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

  std::vector<OfflineResult> ExpectTogetherEqualsAlone(
      const std::vector<OfflineRequest>& requests, OfflineOptions options);

  engine::LoadedModel model_;
};

// The four prompts of these tests.
std::vector<OfflineRequest> FourRequests(
    const std::function<OfflineRequest(const std::string&, int32_t)>& make) {
  return {make("Once upon a time", 64),
          make("Lily and Tom were best friends", 48),
          make("The little dog", 56),
          make("One day, a big bear came to the park", 40)};
}

// Runs each request alone, then all four together in 5 KV blocks with
// 8-token steps (preemption by recompute), and expects every request's
// output to be the same both ways. Returns the solo results.
std::vector<OfflineResult> StoriesSchedulerTest::ExpectTogetherEqualsAlone(
    const std::vector<OfflineRequest>& requests, OfflineOptions options) {
  std::vector<OfflineResult> alone;
  for (const OfflineRequest& r : requests) {
    auto result = RunOffline(MakeEngine(KvBlocksToRunTogether({r}, 16)),
                             *model_.tokenizer, {r}, options);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    alone.push_back((*result)[0]);
  }
  // 5 blocks hold the longest request alone; the four need 17 together.
  EXPECT_EQ(KvBlocksToRunTogether(requests, 16), 17);
  options.max_batched_tokens = 8;
  options.max_running = 8;
  OfflineStats stats;
  auto together =
      RunOffline(MakeEngine(5), *model_.tokenizer, requests, options, &stats);
  EXPECT_TRUE(together.ok()) << together.status();
  if (!together.ok()) return alone;
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*together)[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ((*together)[i].finish.reason, alone[i].finish.reason);
  }
  return alone;
}

TEST_F(StoriesSchedulerTest, GreedyOutputUnderPreemptionEqualsEachAlone) {
  const std::vector<OfflineResult> alone = ExpectTogetherEqualsAlone(
      FourRequests(
          [this](const std::string& p, int32_t n) { return Request(p, n); }),
      OfflineOptions());
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(alone[0].tokens, kOnceUponATime64);
}

// Rows sampled in the engine (EngineSampling::kAlways; the CPU engine
// samples after Forward by row_sampling.h's rule): greedy still gives
// llama.cpp's tokens, and seeded sampled requests run together under
// preemption give the tokens each gets alone.
TEST_F(StoriesSchedulerTest,
       EngineSampledOutputUnderPreemptionEqualsEachAlone) {
  const float temperatures[] = {0.0f, 0.8f, 1.0f, 1.2f};
  int i = 0;
  const std::vector<OfflineRequest> requests =
      FourRequests([&](const std::string& p, int32_t n) {
        OfflineRequest r = Request(p, n);
        r.sampling.temperature = temperatures[i];
        r.sampling.top_k = i == 2 ? 20 : 0;
        r.sampling.top_p = i == 3 ? 0.9f : 1.0f;
        r.sampling.min_p = i == 1 ? 0.05f : 0.0f;
        r.sampling.seed = 1000 + i;
        ++i;
        return r;
      });
  OfflineOptions options;
  options.engine_sampling = EngineSampling::kAlways;
  const std::vector<OfflineResult> alone =
      ExpectTogetherEqualsAlone(requests, options);
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(alone[0].tokens, kOnceUponATime64);
}

}  // namespace
}  // namespace paceline::scheduler
