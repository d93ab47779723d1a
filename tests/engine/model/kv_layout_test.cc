// KV groups (engine/model/kv_layout.h) and what the memory planner counts
// with them, against hand arithmetic on Gemma 3 4B's shape
// (google/gemma-3-4b-it config.json: 34 layers, every 6th global, window
// 1,024, 4 KV heads of 256).

#include "engine/model/kv_layout.h"

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

ModelConfig Gemma3_4bShape() {
  ModelConfig c;
  c.architecture = "gemma3";
  c.n_layers = 34;
  c.n_embd = 2560;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.head_dim = 256;
  c.n_ff = 10240;
  c.n_vocab = 262144;
  c.context_length = 131072;
  c.tied_output = true;
  c.sliding_window = 1024;
  c.swa_period = 6;
  return c;
}

TEST(KvLayoutTest, WithoutSlidingLayersOneGroupOfEveryLayer) {
  ModelConfig c = Gemma3_4bShape();
  c.sliding_window = 0;
  for (const bool release : {true, false}) {
    const KvLayout layout = PlanKvLayout(c, release);
    ASSERT_EQ(layout.num_groups(), 1);
    EXPECT_EQ(layout.slots, 34);
    EXPECT_EQ(layout.groups[0].window, 0);
    for (int32_t l = 0; l < 34; ++l) {
      EXPECT_EQ(layout.group_of_layer[l], 0);
      EXPECT_EQ(layout.slot_of_layer[l], l);
    }
  }
  // Release off: the same with sliding layers.
  EXPECT_EQ(PlanKvLayout(Gemma3_4bShape(), false).num_groups(), 1);
}

TEST(KvLayoutTest, EveryLayerSlidingIsOneWindowedGroup) {
  ModelConfig c = Gemma3_4bShape();
  c.swa_period = 0;  // every layer slides
  const KvLayout layout = PlanKvLayout(c, true);
  ASSERT_EQ(layout.num_groups(), 1);
  EXPECT_EQ(layout.slots, 34);
  EXPECT_EQ(layout.groups[0].window, 1024);
  EXPECT_EQ(layout.slot_of_layer[33], 33);
  EXPECT_EQ(BlocksToHold(layout, 16, 32768, 1), 65);
}

TEST(KvLayoutTest, Gemma3GroupsFiveLayersPerBlock) {
  const KvLayout layout = PlanKvLayout(Gemma3_4bShape(), true);
  // 5 global layers (5, 11, 17, 23, 29): one full group of 5 slots; the
  // 29 sliding ones in 6 windowed groups of 5, the last of 4.
  EXPECT_EQ(layout.slots, 5);
  ASSERT_EQ(layout.num_groups(), 7);
  EXPECT_EQ(layout.groups[0].window, 0);
  EXPECT_EQ(layout.groups[0].layers, (std::vector<int64_t>{5, 11, 17, 23, 29}));
  for (int g = 1; g < 7; ++g) EXPECT_EQ(layout.groups[g].window, 1024);
  EXPECT_EQ(layout.groups[1].layers, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(layout.groups[6].layers, (std::vector<int64_t>{30, 31, 32, 33}));
  EXPECT_EQ(layout.group_of_layer[17], 0);
  EXPECT_EQ(layout.slot_of_layer[17], 2);
  EXPECT_EQ(layout.group_of_layer[8], 2);  // layers 6..10 (not 11)
  EXPECT_EQ(layout.slot_of_layer[8], 2);
  EXPECT_EQ(layout.Windows(),
            (std::vector<int32_t>{0, 1024, 1024, 1024, 1024, 1024, 1024}));
  // A windowed group holds the window's 64 blocks and one more when the
  // window is not block-aligned; a step of 512 tokens adds 32.
  EXPECT_EQ(GroupBlocksToHold(1024, 16, 32768, 1), 65);
  EXPECT_EQ(GroupBlocksToHold(1024, 16, 32768, 512), 97);
  EXPECT_EQ(GroupBlocksToHold(1024, 16, 100, 512), 7);  // short: all
  EXPECT_EQ(GroupBlocksToHold(0, 16, 32768, 512), 2048);
  EXPECT_EQ(BlocksToHold(layout, 16, 32768, 1), 2048 + 6 * 65);
}

TEST(KvLayoutTest, ThePlanCountsReleasedWindows) {
  MemoryPlanRequest r;
  r.weights_recipe = WeightRecipe::Uniform(GgmlType::kF16);
  r.kv_type = GgmlType::kF16;
  r.sequences = 2;
  // Every layer: 2 x 34 x 4 x 256 x 2 bytes per token. A block slot: 2 x
  // 4 x 256 x 2 = 4,096 bytes per token, 5 slots per block.
  const uint64_t per_token = 2 * 34 * 4 * 256 * 2;
  const uint64_t per_slot_token = 2 * 4 * 256 * 2;
  const uint64_t windowed = 6 * 5 * per_slot_token * (65 * 16);
  for (const int64_t context : {4096, 32768}) {
    r.context = context;
    absl::StatusOr<MemoryPlan> plan = PlanMemory(Gemma3_4bShape(), r);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->kv_groups, 7);
    EXPECT_EQ(plan->kv_slots, 5);
    EXPECT_EQ(plan->kv_bytes_per_token, per_token);
    EXPECT_EQ(plan->kv_bytes_per_sequence_full, per_token * context);
    const uint64_t released = 5 * per_slot_token * context + windowed;
    EXPECT_EQ(plan->kv_bytes_per_sequence, released);
    EXPECT_EQ(plan->kv_bytes, 2 * released);
  }
  // 32k: 640 MiB + 121.9 MiB instead of 4,352 MiB, 17.5 %.
  EXPECT_EQ(5 * per_slot_token * 32768 + windowed, uint64_t{798'883'840});
  // Release off, or the same shape without windows: full history.
  r.window_release = false;
  absl::StatusOr<MemoryPlan> off = PlanMemory(Gemma3_4bShape(), r);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->kv_groups, 1);
  EXPECT_EQ(off->kv_bytes_per_sequence, per_token * 32768);
  // The budget counts sequences by what they hold.
  r.window_release = true;
  r.memory_bytes = 10 * uint64_t{798'883'840} + 123;
  r.weights_recipe.reset();
  r.weights_file_bytes = 0;
  absl::StatusOr<MemoryPlan> fit = PlanMemory(Gemma3_4bShape(), r);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(fit->fit.has_value());
  EXPECT_EQ(fit->fit->sequences_that_fit, 10);
}

}  // namespace
}  // namespace paceline::engine
