// The hybrid linear-attention files of ../shared/oracle-next (qwen35,
// qwen35moe, qwen3next): what the config, the layer programs, the KV layout
// and the memory planner make of them, against the facts the oracle's
// README states (dim 256, 4 heads / 2 KV heads of 64; DeltaNet: conv
// kernel 4, 2 key heads and 4 value heads of 64, so 512 convolution
// channels; qwen35: 4 layers, every 4th attention; the MoE ones: 2 layers,
// every 2nd) and the files' own tensor element counts.

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/gguf/gguf_file.h"
#include "engine/model/kv_layout.h"
#include "engine/model/layer_program.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

struct HybridFile {
  const char* name;
  int64_t layers;
  int64_t interval;
  bool grouped;  // qwen3next reads key heads grouped, and fuses beta/alpha
};

class HybridModelTest : public ::testing::TestWithParam<HybridFile> {
 protected:
  void SetUp() override {
    const std::filesystem::path path =
        ::paceline::testing::OracleNextDir() / "models" /
        (std::string(GetParam().name) + ".gguf");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
    absl::StatusOr<std::unique_ptr<GgufFile>> file =
        GgufFile::Open(path.string());
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(*file_);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
};

TEST_P(HybridModelTest, EveryIntervalthLayerAttendsTheOthersAreDeltaNet) {
  const HybridFile& f = GetParam();
  ASSERT_EQ(config_.n_layers, f.layers);
  for (int64_t l = 0; l < f.layers; ++l) {
    EXPECT_EQ(config_.IsRecurrentLayer(l), (l + 1) % f.interval != 0) << l;
  }
  EXPECT_EQ(config_.NumRecurrentLayers(), f.layers - f.layers / f.interval);
  EXPECT_EQ(config_.ssm_conv_dim(), 512);
  EXPECT_EQ(config_.ssm_grouped_heads, f.grouped);
  EXPECT_EQ(config_.ssm_fused_ba, f.grouped);
  EXPECT_TRUE(config_.attn_output_gate);
  EXPECT_EQ(config_.rope_dim, 16);
}

TEST_P(HybridModelTest, ParameterCountIsTheFilesElementCount) {
  int64_t elements = 0;
  for (const GgufTensorInfo& t : file_->tensors()) {
    elements += t.num_elements();
  }
  EXPECT_EQ(config_.ParameterCount(), elements);
}

TEST_P(HybridModelTest, DeltaNetLayersRunTheRecurrenceAndHoldNoKv) {
  absl::StatusOr<std::vector<LayerProgram>> programs = LayerPrograms(config_);
  ASSERT_TRUE(programs.ok()) << programs.status();
  const KvLayout layout = PlanKvLayout(config_, /*release_windows=*/true);
  int64_t kv_layers = 0;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    bool delta = false, gated_attention = false;
    for (const Op& op : (*programs)[l].ops) {
      delta = delta || op.kind == OpKind::kDeltaNet;
      gated_attention = gated_attention ||
                        (op.kind == OpKind::kAttention && op.output_gate);
    }
    EXPECT_EQ(delta, config_.IsRecurrentLayer(l)) << l;
    EXPECT_EQ(gated_attention, !config_.IsRecurrentLayer(l)) << l;
    EXPECT_EQ(layout.slot_of_layer[l] < 0, config_.IsRecurrentLayer(l)) << l;
    kv_layers += layout.slot_of_layer[l] >= 0 ? 1 : 0;
  }
  EXPECT_EQ(kv_layers, GetParam().layers / GetParam().interval);
  EXPECT_EQ(layout.slots, kv_layers);
}

TEST_P(HybridModelTest, PlanCountsKvOfAttentionLayersAndAFixedState) {
  // Per DeltaNet layer: 3 convolution inputs of 512 channels and 4 value
  // heads' 64 x 64 matrices, in float32.
  const uint64_t per_layer = (3 * 512 + 4 * 64 * 64) * 4;
  const int64_t recurrent =
      GetParam().layers - GetParam().layers / GetParam().interval;
  EXPECT_EQ(config_.RecurrentStateBytes(),
            static_cast<int64_t>(per_layer) * recurrent);
  MemoryPlanRequest request;
  request.weights_file_bytes = 1 << 20;
  request.kv_type = GgmlType::kF16;
  request.context = 4096;
  request.sequences = 3;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(config_, request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const uint64_t attention = GetParam().layers / GetParam().interval;
  // K and V of 2 KV heads of 64, F16, per attention layer.
  EXPECT_EQ(plan->kv_bytes_per_token, attention * 2 * 2 * 64 * 2);
  EXPECT_EQ(plan->state_bytes_per_sequence, per_layer * recurrent);
  EXPECT_EQ(plan->state_bytes, 3 * per_layer * recurrent);
  EXPECT_EQ(plan->total_bytes, (1u << 20) + plan->kv_bytes + plan->state_bytes);
  EXPECT_EQ(plan->attention_layers, static_cast<int64_t>(attention));
  EXPECT_EQ(plan->recurrent_layers, recurrent);
}

INSTANTIATE_TEST_SUITE_P(
    Files, HybridModelTest,
    ::testing::Values(HybridFile{"qwen35-base-f32", 4, 4, false},
                      HybridFile{"qwen35-base-q4_k_m", 4, 4, false},
                      HybridFile{"qwen35moe-base-q8_0", 2, 2, false},
                      HybridFile{"qwen3next-base-f32", 2, 2, true}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace paceline::engine
