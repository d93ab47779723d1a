// Request groups (OpenAI's `n`) over the real CPU engine and stories260K:
// the children fork the parent's KV blocks and the engine copies the
// shared partial block (Engine::CopyBlocks). Greedy, every choice gives
// llama.cpp's reference tokens (../shared/models/README.md); sampled, under
// a KV pool small enough to preempt forked children, choice i gives what a
// single request seeded seed + i gets alone.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "scheduler/serving_loop.h"
#include "tests/scheduler/stories_cpu_engine.h"
#include "tests/testing/scheduler_test_util.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::scheduler {
namespace {

class StoriesGroupTest : public testing::StoriesCpuTest<> {
 protected:
  // Member i of the group: `sampling` with seed + i.
  RequestSpec Member(const engine::SamplingParams& sampling, int32_t i,
                     int32_t max_tokens) {
    RequestSpec spec;
    spec.tenant = "offline";
    spec.prompt = ::paceline::testing::kOnceUponATimePrompt;
    spec.sampling = sampling;
    spec.sampling.seed = sampling.seed + i;
    spec.stop.max_tokens = max_tokens;
    spec.sink = std::make_shared<CollectingSink>();
    return spec;
  }

  struct GroupRun {
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    SchedulerCounters counters;
    kvpager::PagerStats kv;
  };

  // Runs one group of n through a serving loop on `num_blocks` blocks.
  GroupRun RunGroup(const engine::SamplingParams& sampling, int32_t n,
                    int32_t max_tokens, int32_t num_blocks,
                    EngineSampling engine_sampling) {
    ServingLoopOptions options;
    options.scheduler.max_batched_tokens = 16;
    TenantConfig tenant;
    tenant.name = "offline";
    options.scheduler.tenants = {tenant};
    options.engine_sampling = engine_sampling;
    auto loop = ServingLoop::Create(MakeEngine(num_blocks),
                                    model_.tokenizer.get(), options);
    EXPECT_TRUE(loop.ok()) << loop.status();
    GroupRun run;
    if (!loop.ok()) return run;
    std::vector<RequestSpec> specs;
    for (int32_t i = 0; i < n; ++i) {
      specs.push_back(Member(sampling, i, max_tokens));
      run.sinks.push_back(
          std::static_pointer_cast<CollectingSink>(specs.back().sink));
    }
    const auto ids = (*loop)->SubmitGroup(std::move(specs));
    EXPECT_TRUE(ids.ok()) << ids.status();
    (*loop)->RunUntilIdle();
    run.counters = (*loop)->scheduler().counters();
    run.kv = (*loop)->scheduler().pager().Stats();
    return run;
  }

  // Member i's request alone, through the offline runner.
  OfflineResult Alone(const engine::SamplingParams& sampling, int32_t i,
                      int32_t max_tokens, EngineSampling engine_sampling) {
    OfflineRequest r;
    r.prompt = ::paceline::testing::kOnceUponATimePrompt;
    r.sampling = sampling;
    r.sampling.seed = sampling.seed + i;
    r.stop.max_tokens = max_tokens;
    OfflineOptions options;
    options.engine_sampling = engine_sampling;
    auto result = RunOffline(MakeEngine(64), *model_.tokenizer, {r}, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? (*result)[0] : OfflineResult();
  }
};

TEST_F(StoriesGroupTest, GreedyEveryChoiceGivesLlamaCppTokens) {
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  const GroupRun run = RunGroup(greedy, 3, 64, 64, EngineSampling::kAuto);
  ASSERT_EQ(run.sinks.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(run.sinks[i]->finished());
    EXPECT_EQ(run.sinks[i]->tokens(), ::paceline::testing::kGreedy64Ids)
        << "choice " << i;
    EXPECT_EQ(testing::TextOf(*model_.tokenizer, run.sinks[i]->tokens()),
              ::paceline::testing::kGreedy64Text);
  }
  // The 5-token prompt's first 4 tokens are shared in one partial block:
  // the first two members to write past them copy it.
  EXPECT_EQ(run.kv.cow_copies, 2);
  EXPECT_EQ(run.counters.preemptions, 0);
  EXPECT_EQ(run.kv.used_blocks, 0);
}

TEST_F(StoriesGroupTest, SampledChoiceIEqualsSeedPlusIAloneUnderPreemption) {
  engine::SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_p = 0.95f;
  sampling.seed = 1000;
  for (EngineSampling where :
       {EngineSampling::kAuto, EngineSampling::kAlways}) {
    SCOPED_TRACE(where == EngineSampling::kAuto ? "host" : "engine");
    // Each member needs 4 blocks (5 + 47 positions); 7 hold fewer than 3.
    const GroupRun run = RunGroup(sampling, 3, 48, 7, where);
    ASSERT_EQ(run.sinks.size(), 3u);
    EXPECT_GT(run.counters.preemptions, 0);
    EXPECT_GE(run.kv.cow_copies, 2);
    EXPECT_EQ(run.kv.used_blocks, 0);
    for (int32_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(run.sinks[i]->finished());
      const OfflineResult alone = Alone(sampling, i, 48, where);
      EXPECT_EQ(run.sinks[i]->tokens(), alone.tokens) << "choice " << i;
      EXPECT_EQ(run.sinks[i]->finish().reason, alone.finish.reason);
    }
    EXPECT_NE(run.sinks[0]->tokens(), run.sinks[1]->tokens());
  }
}

}  // namespace
}  // namespace paceline::scheduler
