// The sampling chain's token mask over the real CPU engine and stories260K
// (tests/testing/token_mask_scenario.h): a scripted mask holds with n-gram
// drafts, a group of n = 4 and preemption, whether the host samples every
// row or the engine samples the rows it may (row_sampling.h's rule).

#include <memory>

#include "gtest/gtest.h"
#include "scheduler/step_sampler.h"
#include "tests/scheduler/stories_cpu_engine.h"
#include "tests/testing/token_mask_scenario.h"

namespace paceline::scheduler {
namespace {

class StoriesTokenMaskTest
    : public testing::StoriesCpuTest<::testing::TestWithParam<EngineSampling>> {
};

TEST_P(StoriesTokenMaskTest, ScriptedMaskHoldsWithDraftsGroupsPreemption) {
  ::paceline::testing::ExpectMaskHolds(
      [this](int32_t blocks) { return MakeEngine(blocks); }, *model_.tokenizer,
      GetParam());
}

TEST_P(StoriesTokenMaskTest, FastForwardKeepsOutputInFewerSteps) {
  ::paceline::testing::ExpectFastForwardKeepsOutput(
      [this](int32_t blocks) { return MakeEngine(blocks); }, *model_.tokenizer,
      GetParam());
}

TEST_P(StoriesTokenMaskTest, DraftsAreCutAtTheMasksFirstRefusal) {
  ::paceline::testing::ExpectDraftsCutByTheMask(
      [this](int32_t blocks) { return MakeEngine(blocks); }, *model_.tokenizer,
      GetParam());
}

INSTANTIATE_TEST_SUITE_P(Where, StoriesTokenMaskTest,
                         ::testing::Values(EngineSampling::kNever,
                                           EngineSampling::kAlways),
                         [](const auto& info) {
                           return info.param == EngineSampling::kNever
                                      ? "Host"
                                      : "Engine";
                         });

}  // namespace
}  // namespace paceline::scheduler
