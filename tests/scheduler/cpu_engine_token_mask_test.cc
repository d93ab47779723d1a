// The sampling chain's token mask over the real CPU engine and stories260K
// (tests/testing/token_mask_scenario.h): a scripted mask holds with n-gram
// drafts, a group of n = 4 and preemption, whether the host samples every
// row or the engine samples the rows it may (row_sampling.h's rule).

#include <memory>

#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "scheduler/step_sampler.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/token_mask_scenario.h"

namespace paceline::scheduler {
namespace {

class StoriesTokenMaskTest
    : public ::testing::TestWithParam<EngineSampling> {
 protected:
  void SetUp() override {
    if (!::paceline::testing::HaveStories260K()) {
      GTEST_SKIP() << "no test model at "
                   << ::paceline::testing::kStories260KPath;
    }
    auto model = engine::OpenModel(::paceline::testing::kStories260KPath);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<engine::Engine> MakeEngine(int32_t num_blocks) {
    engine::cpu::CpuEngineOptions options;
    options.block_size = 16;
    options.num_blocks = num_blocks;
    options.max_tokens_per_step = 64;
    options.num_threads = 1;
    auto engine = engine::cpu::CpuEngine::Create(model_.weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  engine::LoadedModel model_;
};

TEST_P(StoriesTokenMaskTest, ScriptedMaskHoldsWithDraftsGroupsPreemption) {
  ::paceline::testing::ExpectMaskHolds(
      [this](int32_t blocks) { return MakeEngine(blocks); }, *model_.tokenizer,
      GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Where, StoriesTokenMaskTest,
    ::testing::Values(EngineSampling::kNever, EngineSampling::kAlways),
    [](const auto& info) {
      return info.param == EngineSampling::kNever ? "Host" : "Engine";
    });

}  // namespace
}  // namespace paceline::scheduler
