// CheckForwardBatch's block tables with KV groups (engine.h,
// forward_batch.h): a full group's table must hold a block for every
// position; a windowed group's only from the window of the slice's first
// position on (kvpager::kNoBlock before it); several groups need one
// table each.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"
#include "gtest/gtest.h"
#include "kvpager/block_table.h"

namespace paceline::engine {
namespace {

constexpr int32_t kNo = kvpager::kNoBlock;

BatchLimits Limits(std::vector<int32_t> windows) {
  BatchLimits limits;
  limits.n_vocab = 100;
  limits.block_size = 4;
  limits.num_blocks = 50;
  limits.max_tokens_per_step = 16;
  limits.group_windows = std::move(windows);
  return limits;
}

// One decode token at position 20 (block 5): window 8 reads 13..20,
// blocks 3..5.
absl::Status Check(const BatchLimits& limits, std::vector<int32_t> table,
                   std::vector<absl::Span<const int32_t>> groups = {}) {
  ForwardBatch batch;
  batch.tokens = {7};
  SequenceSlice slice;
  slice.token_count = 1;
  slice.position_begin = 20;
  slice.num_logits = 1;
  slice.block_table = table;
  slice.group_tables = groups;
  batch.sequences = {slice};
  std::vector<int32_t> owner(1);
  return CheckForwardBatch(batch, 100, limits, absl::MakeSpan(owner));
}

TEST(ForwardBatchCheckTest, AFullGroupNeedsEveryBlock) {
  EXPECT_TRUE(Check(Limits({}), {0, 1, 2, 3, 4, 5}).ok());
  EXPECT_EQ(Check(Limits({}), {kNo, 1, 2, 3, 4, 5}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ForwardBatchCheckTest, AWindowedGroupNeedsOnlyItsWindow) {
  // Every layer windowed: one group, block_table is its table.
  EXPECT_TRUE(Check(Limits({8}), {kNo, kNo, kNo, 3, 4, 5}).ok());
  EXPECT_EQ(Check(Limits({8}), {kNo, kNo, kNo, kNo, 4, 5}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ForwardBatchCheckTest, SeveralGroupsNeedATableEach) {
  const std::vector<int32_t> full = {0, 1, 2, 3, 4, 5};
  const std::vector<int32_t> windowed = {kNo, kNo, kNo, 9, 10, 11};
  EXPECT_TRUE(Check(Limits({0, 8}), full, {full, windowed}).ok());
  EXPECT_EQ(Check(Limits({0, 8}), full, {full}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(Limits({0, 8}), full).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(Limits({0, 8}), full, {windowed, windowed}).code(),
            absl::StatusCode::kInvalidArgument);  // the full group's
  // One group (the CUDA engine's limits): group tables beyond one refused.
  EXPECT_EQ(Check(Limits({}), full, {full, windowed}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::engine
