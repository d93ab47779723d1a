// The architectures' layer descriptions (model/layer_program.h,
// model/arch/): every architecture a file or a named shape may have is
// described, its layers read the weights the file holds (Q/K/V biases
// where the config found them, Q/K norms where the architecture has them,
// experts for a MoE), and an unknown architecture has no program. The
// programs' logits are checked by the engines' oracle tests.

#include "engine/model/layer_program.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/model/model_shapes.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

const Op* FindOp(const LayerProgram& p, OpKind kind) {
  auto it = std::find_if(p.ops.begin(), p.ops.end(),
                         [&](const Op& op) { return op.kind == kind; });
  return it == p.ops.end() ? nullptr : &*it;
}

TEST(LayerProgramTest, EveryNamedShapesArchitectureIsDescribed) {
  for (absl::string_view name : ModelShapeNames()) {
    SCOPED_TRACE(std::string(name));
    absl::StatusOr<ModelConfig> c = FindModelShape(name);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<std::vector<LayerProgram>> programs = LayerPrograms(*c);
    ASSERT_TRUE(programs.ok()) << programs.status();
    ASSERT_EQ(programs->size(), static_cast<size_t>(c->n_layers));
    for (int64_t l = 0; l < c->n_layers; ++l) {
      const LayerProgram& p = (*programs)[l];
      // A hybrid's DeltaNet layer mixes tokens by its recurrence instead.
      const Op* qkv = FindOp(p, c->IsRecurrentLayer(l) ? OpKind::kDeltaNet
                                                       : OpKind::kQkvRope);
      ASSERT_NE(qkv, nullptr);
      EXPECT_EQ(FindOp(p, OpKind::kAttention) == nullptr,
                c->IsRecurrentLayer(l));
      if (!c->IsRecurrentLayer(l)) {
        EXPECT_EQ(qkv->qkv_bias, c->qkv_bias);
        EXPECT_EQ(qkv->qk_norm, c->qk_norm);
        EXPECT_EQ(qkv->output_gate, c->attn_output_gate);
      }
      const Op* ffn = FindOp(p, OpKind::kFeedForward);
      ASSERT_NE(ffn, nullptr);
      EXPECT_EQ(ffn->moe, c->is_moe());
      // Attention before the feed-forward, whose output joins the
      // residual: accumulated into it, or (post-norms) added after.
      EXPECT_LT(qkv - p.ops.data(), ffn - p.ops.data());
      const bool added =
          std::any_of(ffn + 1, p.ops.data() + p.ops.size(), [](const Op& op) {
            return op.kind == OpKind::kAdd && op.src == Buf::kProj &&
                   op.dst == Buf::kX;
          });
      EXPECT_TRUE((ffn->dst == Buf::kX && ffn->accumulate) ||
                  (ffn->dst == Buf::kProj && added));
      EXPECT_EQ(ffn->activation, c->ffn_activation);
    }
  }
}

TEST(LayerProgramTest, TheArchitectureTableSaysWhatTheFilesHold) {
  const Architecture* llama = FindArchitecture("llama");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->rope_layout, RopeLayout::kAdjacentPairs);
  EXPECT_TRUE(llama->may_have_qkv_bias);
  const Architecture* qwen3moe = FindArchitecture("qwen3moe");
  ASSERT_NE(qwen3moe, nullptr);
  EXPECT_TRUE(qwen3moe->moe);
  EXPECT_TRUE(qwen3moe->qk_norm);
  EXPECT_EQ(qwen3moe->rope_layout, RopeLayout::kNeoxHalves);
  // A llama file with biases (some conversions have them) runs them.
  ModelConfig c = FindModelShape("stories15m").value();
  c.qkv_bias = true;
  const LayerProgram p = llama->layer(c, 0);
  EXPECT_TRUE(FindOp(p, OpKind::kQkvRope)->qkv_bias);
}

// Gemma 3 (llama.cpp's pattern: layer l slides when l % period < period
// - 1): the sliding layers' window and RoPE, norms after attention and the
// feed-forward before each joins the residual, GeGLU.
TEST(LayerProgramTest, Gemma3SlidesOnItsPatternWithPostNorms) {
  const Architecture* gemma3 = FindArchitecture("gemma3");
  ASSERT_NE(gemma3, nullptr);
  ModelConfig c;
  c.architecture = "gemma3";
  c.n_layers = 6;
  c.sliding_window = 32;
  c.swa_period = 3;
  gemma3->configure(&c);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    SCOPED_TRACE(l);
    const bool sliding = l % 3 != 2;
    EXPECT_EQ(c.IsSlidingLayer(l), sliding);
    const LayerProgram p = gemma3->layer(c, l);
    EXPECT_EQ(FindOp(p, OpKind::kQkvRope)->local_rope, sliding);
    EXPECT_TRUE(FindOp(p, OpKind::kQkvRope)->qk_norm);
    EXPECT_EQ(FindOp(p, OpKind::kAttention)->window, sliding ? 32 : 0);
    EXPECT_EQ(FindOp(p, OpKind::kFeedForward)->activation,
              FfnActivation::kGeluTanh);
    // out-proj, post norm, add; the same after the feed-forward.
    std::vector<Weight> norms;
    for (const Op& op : p.ops) {
      if (op.kind == OpKind::kRmsNorm && op.src == Buf::kProj) {
        EXPECT_EQ(op.dst, Buf::kProj);
        norms.push_back(op.weight);
      }
      if (op.kind == OpKind::kMatMul || op.kind == OpKind::kFeedForward) {
        EXPECT_FALSE(op.accumulate);
        EXPECT_EQ(op.dst, Buf::kProj);
      }
    }
    EXPECT_EQ(norms, (std::vector<Weight>{Weight::kPostAttnNorm,
                                          Weight::kPostFfnNorm}));
  }
  c.sliding_window = 0;  // no window key: every layer global
  EXPECT_EQ(FindOp(gemma3->layer(c, 0), OpKind::kAttention)->window, 0);
}

// gpt-oss (llama.cpp's default period 2: even layers slide): sinks on
// every attention, biases on Q/K/V and the attention output, the FFN norm
// before a MoE with SwiGLU-OAI, both sub-layers accumulated.
TEST(LayerProgramTest, GptOssAlternatesWindowsWithSinksAndBiases) {
  const Architecture* oss = FindArchitecture("gpt-oss");
  ASSERT_NE(oss, nullptr);
  EXPECT_TRUE(oss->moe);
  ModelConfig c;
  c.architecture = "gpt-oss";
  c.n_layers = 4;
  c.sliding_window = 128;
  c.swa_period = 2;
  oss->configure(&c);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    SCOPED_TRACE(l);
    const LayerProgram p = oss->layer(c, l);
    EXPECT_TRUE(FindOp(p, OpKind::kQkvRope)->qkv_bias);
    EXPECT_FALSE(FindOp(p, OpKind::kQkvRope)->local_rope);
    EXPECT_EQ(FindOp(p, OpKind::kAttention)->window, l % 2 == 0 ? 128 : 0);
    EXPECT_TRUE(FindOp(p, OpKind::kAttention)->sinks);
    const Op* out = FindOp(p, OpKind::kMatMul);
    EXPECT_TRUE(out->bias && out->accumulate);
    EXPECT_EQ(out->weight, Weight::kAttnOutput);
    const Op* ffn = FindOp(p, OpKind::kFeedForward);
    EXPECT_TRUE(ffn->moe && ffn->accumulate);
    EXPECT_EQ(ffn->activation, FfnActivation::kSwigluOai);
    EXPECT_EQ((ffn - 1)->weight, Weight::kFfnNorm);
  }
  EXPECT_TRUE(c.ffn_norm_is_post_attention_norm && c.moe_biases);
}

TEST(LayerProgramTest, AnUnknownArchitectureHasNoProgram) {
  EXPECT_EQ(FindArchitecture("mamba"), nullptr);
  ModelConfig c;
  c.architecture = "mamba";
  c.n_layers = 2;
  absl::StatusOr<std::vector<LayerProgram>> p = LayerPrograms(c);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("mamba"), std::string::npos);
  EXPECT_NE(SupportedArchitectures().find("qwen3moe"), std::string::npos);
}

}  // namespace
}  // namespace paceline::engine
