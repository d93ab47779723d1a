#ifndef PACELINE_TESTS_SCHEDULER_STORIES_CPU_ENGINE_H_
#define PACELINE_TESTS_SCHEDULER_STORIES_CPU_ENGINE_H_

// The scheduler tests' model and engine: stories260K (skipped without it)
// on a one-thread CPU engine with 16-token blocks and 64-token steps.

#include <cstdint>
#include <memory>

#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::scheduler::testing {

template <typename Base = ::testing::Test>
class StoriesCpuTest : public Base {
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

  // A fresh engine over the model with `num_blocks` KV blocks.
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

}  // namespace paceline::scheduler::testing

#endif  // PACELINE_TESTS_SCHEDULER_STORIES_CPU_ENGINE_H_
