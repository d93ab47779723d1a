// The sampling chain's token mask on the CUDA engine (or its host
// emulation) over stories260K: the scheduler hands each engine-sampled
// row's mask with its RowSampling, the engine uploads it with the step, and
// the sampling kernel keeps every draw inside it — with n-gram drafts, a
// group of n = 4 and preemption (tests/testing/token_mask_scenario.h).

#include <memory>

#include "engine/cuda/cuda_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "scheduler/step_sampler.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/testing/stories260k_oracle.h"
#include "tests/testing/token_mask_scenario.h"

namespace paceline::engine::cuda {
namespace {

class CudaTokenMaskTest : public testing::GpuTest {};

// CUDA engines over `weights`, each with the blocks asked for.
::paceline::testing::EngineFactory Engines(
    std::shared_ptr<const ModelWeights> weights) {
  return [weights](int32_t num_blocks) -> std::unique_ptr<Engine> {
    CudaEngineOptions options;
    options.block_size = 16;
    options.num_blocks = num_blocks;
    options.max_tokens_per_step = 64;
    auto engine = CudaEngine::Create(weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  };
}

TEST_F(CudaTokenMaskTest, ScriptedMaskHoldsWithDraftsGroupsPreemption) {
  auto model = OpenModel(::paceline::testing::kStories260KPath);
  ASSERT_TRUE(model.ok()) << model.status();
  ::paceline::testing::ExpectMaskHolds(Engines(model->weights),
                                       *model->tokenizer,
                                       scheduler::EngineSampling::kAuto);
}

// Fast-forward's forced tokens computed as a chunk on the device give the
// K/V of one token a step: the output is the same, in fewer steps.
TEST_F(CudaTokenMaskTest, FastForwardKeepsOutputInFewerSteps) {
  auto model = OpenModel(::paceline::testing::kStories260KPath);
  ASSERT_TRUE(model.ok()) << model.status();
  ::paceline::testing::ExpectFastForwardKeepsOutput(
      Engines(model->weights), *model->tokenizer,
      scheduler::EngineSampling::kAuto);
}

}  // namespace
}  // namespace paceline::engine::cuda
