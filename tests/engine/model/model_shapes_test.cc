// The named shapes against their published configs (sources cited in
// engine/model_shapes.cc), their parameter counts, and dummy: specs.

#include "engine/model/model_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

ModelConfig Shape(absl::string_view name) {
  absl::StatusOr<ModelConfig> config = FindModelShape(name);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig{};
}

// Embedding, per block (attention, FFN, two norms, optional QKV bias and
// QK-norm), final norm, and the output matrix unless tied: written out here
// independently of ModelConfig::ParameterCount().
int64_t HandParameterCount(const ModelConfig& c) {
  const int64_t q = c.n_heads * c.head_dim;
  const int64_t kv = c.n_kv_heads * c.head_dim;
  // A MoE layer: a router row and three matrices per expert.
  const int64_t ffn = c.n_expert > 0
                          ? c.n_expert * (c.n_embd + 3 * c.n_embd * c.n_ff_exp)
                          : 3 * c.n_embd * c.n_ff;
  // Attention (its Q matrix twice as tall with an output gate).
  const int64_t attention = c.n_embd * q * (c.attn_output_gate ? 2 : 1) +
                            2 * c.n_embd * kv + q * c.n_embd +
                            (c.qk_norm ? 2 * c.head_dim : 0);
  // A Gated DeltaNet layer: qkv (2 key dims + value dim), z, beta, alpha,
  // the convolution, A and dt per value head, the head norm, ssm_out.
  const int64_t key = c.ssm_k_heads * c.ssm_state_size;
  const int64_t value = c.ssm_v_heads * c.ssm_state_size;
  const int64_t delta = c.n_embd * (2 * key + value) + c.n_embd * value +
                        2 * c.ssm_v_heads * c.n_embd +
                        c.ssm_conv_kernel * (2 * key + value) +
                        2 * c.ssm_v_heads + c.ssm_state_size + value * c.n_embd;
  int64_t block = ffn + 2 * c.n_embd;
  if (c.n_ff_shexp > 0) block += c.n_embd + 3 * c.n_embd * c.n_ff_shexp;
  if (c.qkv_bias) block += q + 2 * kv;
  if (c.post_norms) block += 2 * c.n_embd;    // gemma3
  if (c.attn_output_bias) block += c.n_embd;  // gpt-oss
  if (c.attn_sinks) block += c.n_heads;       // gpt-oss: one per head
  // gpt-oss: per expert, the router's bias and its gate, up, down biases.
  if (c.moe_biases) block += c.n_expert * (1 + 2 * c.n_ff_exp + c.n_embd);
  const int64_t embedding = c.n_vocab * c.n_embd;
  int64_t layers = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool linear = c.full_attention_interval > 0 &&
                        (l + 1) % c.full_attention_interval != 0;
    layers += block + (linear ? delta : attention);
  }
  return embedding + layers + c.n_embd + (c.tied_output ? 0 : embedding);
}

TEST(ModelShapesTest, NamesAreListedOnceAndAllResolve) {
  const std::vector<absl::string_view> names = ModelShapeNames();
  for (absl::string_view required :
       {"stories110m", "llama-1b", "llama-7b", "llama-3-8b", "qwen3-0.6b"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), required), 1) << required;
  }
  for (absl::string_view name : names) {
    ModelConfig c = Shape(name);
    EXPECT_EQ(c.name, name);
    EXPECT_GT(c.n_layers, 0) << name;
    EXPECT_EQ(c.n_heads % c.n_kv_heads, 0) << name;
    // Every shape rotates whole heads but the hybrids (a quarter).
    EXPECT_EQ(c.rope_dim, c.NumRecurrentLayers() > 0 ? c.head_dim / 4
                                                      : c.head_dim)
        << name;
    EXPECT_GT(c.context_length, 0) << name;
  }
}

TEST(ModelShapesTest, UnknownShapeListsKnownOnes) {
  absl::StatusOr<ModelConfig> c = FindModelShape("llama-70b");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "llama-70b"));
  for (absl::string_view name : ModelShapeNames()) {
    EXPECT_TRUE(absl::StrContains(c.status().message(), name)) << name;
  }
  EXPECT_FALSE(FindModelShape("LLAMA-7B").ok());
  EXPECT_FALSE(FindModelShape("").ok());
}

// llama2.c README "models" table: 110M = dim 768, 12 layers, 12 heads, 12 KV
// heads, context 1024; FFN 2048 from model.py; separate output matrix.
TEST(ModelShapesTest, Stories110m) {
  ModelConfig c = Shape("stories110m");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.n_layers, 12);
  EXPECT_EQ(c.n_heads, 12);
  EXPECT_EQ(c.n_kv_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_EQ(c.n_vocab, 32000);
  EXPECT_EQ(c.context_length, 1024);
  EXPECT_FALSE(c.tied_output);
  EXPECT_EQ(c.rope_layout, RopeLayout::kAdjacentPairs);
}

// meta-llama/Llama-3.2-1B config.json.
TEST(ModelShapesTest, Llama1b) {
  ModelConfig c = Shape("llama-1b");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_embd, 2048);
  EXPECT_EQ(c.n_layers, 16);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 8192);
  EXPECT_EQ(c.n_vocab, 128256);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_DOUBLE_EQ(c.rope_freq_base, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_TRUE(c.tied_output);
}

// meta-llama/Llama-2-7b-hf config.json.
TEST(ModelShapesTest, Llama7b) {
  ModelConfig c = Shape("llama-7b");
  EXPECT_EQ(c.n_embd, 4096);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.n_ff, 11008);
  EXPECT_EQ(c.n_vocab, 32000);
  EXPECT_EQ(c.context_length, 4096);
  EXPECT_DOUBLE_EQ(c.rope_freq_base, 10000.0);
  EXPECT_FALSE(c.tied_output);
}

// meta-llama/Meta-Llama-3-8B config.json.
TEST(ModelShapesTest, Llama3_8b) {
  ModelConfig c = Shape("llama-3-8b");
  EXPECT_EQ(c.n_embd, 4096);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.n_ff, 14336);
  EXPECT_EQ(c.n_vocab, 128256);
  EXPECT_EQ(c.context_length, 8192);
  EXPECT_DOUBLE_EQ(c.rope_freq_base, 500000.0);
  EXPECT_FALSE(c.tied_output);
}

// Qwen/Qwen3-0.6B config.json.
TEST(ModelShapesTest, Qwen3_0_6b) {
  ModelConfig c = Shape("qwen3-0.6b");
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_EQ(c.n_embd, 1024);
  EXPECT_EQ(c.n_layers, 28);
  EXPECT_EQ(c.n_heads, 16);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not 1024 / 16
  EXPECT_EQ(c.n_ff, 3072);
  EXPECT_EQ(c.n_vocab, 151936);
  EXPECT_EQ(c.context_length, 40960);
  EXPECT_DOUBLE_EQ(c.rope_freq_base, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tied_output);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.rope_layout, RopeLayout::kNeoxHalves);
}

// Qwen/Qwen2-0.5B config.json.
TEST(ModelShapesTest, Qwen2_0_5b) {
  ModelConfig c = Shape("qwen2-0.5b");
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.n_embd, 896);
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.n_heads, 14);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 4864);
  EXPECT_EQ(c.n_vocab, 151936);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_output);
  EXPECT_FALSE(c.qk_norm);
}

TEST(ModelShapesTest, ParameterCountsMatchHandArithmetic) {
  for (absl::string_view name : ModelShapeNames()) {
    ModelConfig c = Shape(name);
    EXPECT_EQ(c.ParameterCount(), HandParameterCount(c)) << name;
  }
}

// The published totals (and ANCHORS.md for the 110M shape).
TEST(ModelShapesTest, ParameterCountsMatchPublishedTotals) {
  EXPECT_EQ(Shape("stories110m").ParameterCount(), 134'105'856);   // 134.1M
  EXPECT_EQ(Shape("qwen2-0.5b").ParameterCount(), 494'032'768);    // 0.49B
  EXPECT_EQ(Shape("qwen3-0.6b").ParameterCount(), 596'049'920);    // 0.6B
  EXPECT_EQ(Shape("llama-1b").ParameterCount(), 1'235'814'400);    // 1.24B
  EXPECT_EQ(Shape("llama-7b").ParameterCount(), 6'738'415'616);    // 6.74B
  EXPECT_EQ(Shape("llama-3-8b").ParameterCount(), 8'030'261'248);  // 8.03B
  // The gpt-oss model card's 20.91B.
  EXPECT_NEAR(static_cast<double>(Shape("gpt-oss-20b").ParameterCount()),
              20.91e9, 0.005e9);
  // Qwen3-Next-80B-A3B's name: 80B weights, 3B active (rounded; without
  // the embedding and the output head, 3.25B).
  const ModelConfig next = Shape("qwen3-next-80b-a3b");
  EXPECT_NEAR(static_cast<double>(next.ParameterCount()), 80e9, 0.5e9);
  EXPECT_NEAR(static_cast<double>(next.ActiveParameterCount() -
                                  2 * next.n_vocab * next.n_embd),
              3e9, 0.3e9);
}

// The architectures' fixed facts reach their shapes (Architecture::
// configure), as they do a file's config.
TEST(ModelShapesTest, NewArchitecturesAreConfigured) {
  const ModelConfig gemma = Shape("gemma3-4b");
  EXPECT_TRUE(gemma.post_norms);
  EXPECT_TRUE(gemma.sliding_rope);
  EXPECT_DOUBLE_EQ(gemma.embed_scale, std::sqrt(2560.0));
  EXPECT_EQ(gemma.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_TRUE(gemma.IsSlidingLayer(4));
  EXPECT_FALSE(gemma.IsSlidingLayer(5));
  const ModelConfig oss = Shape("gpt-oss-20b");
  EXPECT_TRUE(oss.attn_sinks && oss.moe_biases && oss.attn_output_bias);
  EXPECT_EQ(oss.ffn_activation, FfnActivation::kSwigluOai);
  EXPECT_FALSE(oss.sliding_rope);
  EXPECT_TRUE(oss.IsSlidingLayer(0));
  EXPECT_FALSE(oss.IsSlidingLayer(1));
  EXPECT_EQ(oss.rope_layout, RopeLayout::kNeoxHalves);
}

// stories110m with 8 experts of its FFN width, 2 used: the dense model's
// count plus 7 more FFNs and a router per layer, plus qwen3's Q/K norms;
// active = the dense count plus routers and norms.
TEST(ModelShapesTest, MoeShapeCountsEveryExpertAndActiveOnes) {
  const ModelConfig dense = Shape("stories110m");
  const ModelConfig moe = Shape("stories110m-moe");
  ASSERT_EQ(moe.architecture, "qwen3moe");
  ASSERT_TRUE(moe.is_moe());
  const int64_t ffn = 3 * 768 * 2048;
  const int64_t extra = 12 * (8 * 768 + 2 * 64);
  EXPECT_EQ(moe.ParameterCount(),
            dense.ParameterCount() + 12 * 7 * ffn + extra);
  EXPECT_EQ(moe.ActiveParameterCount(),
            dense.ParameterCount() + 12 * 1 * ffn + extra);
  EXPECT_EQ(dense.ActiveParameterCount(), dense.ParameterCount());
}

TEST(DummyModelSpecTest, ShapeOnly) {
  absl::StatusOr<DummyModelSpec> spec = ParseDummyModelSpec("dummy:llama-1b");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->shape, "llama-1b");
  EXPECT_EQ(spec->config.n_layers, 16);
  EXPECT_FALSE(spec->weights_recipe.has_value());
}

TEST(DummyModelSpecTest, ShapeAndDtype) {
  absl::StatusOr<DummyModelSpec> spec =
      ParseDummyModelSpec("dummy:qwen3-0.6b:q4_0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->shape, "qwen3-0.6b");
  EXPECT_EQ(spec->weights_recipe, WeightRecipe::Uniform(GgmlType::kQ4_0));
}

TEST(DummyModelSpecTest, KQuantTypesAndMixes) {
  const struct {
    const char* dtype;
    WeightRecipe recipe;
  } kCases[] = {
      {"q6_k", WeightRecipe::Uniform(GgmlType::kQ6_K)},
      {"q5_k", WeightRecipe::Uniform(GgmlType::kQ5_K)},
      {"q4_k", WeightRecipe::Uniform(GgmlType::kQ4_K)},
      {"q3_k", WeightRecipe::Uniform(GgmlType::kQ3_K)},
      {"q2_k", WeightRecipe::Mix(WeightMix::kQ2_K)},
      {"q4_k_m", WeightRecipe::Mix(WeightMix::kQ4_K_M)},
      {"q5_k_m", WeightRecipe::Mix(WeightMix::kQ5_K_M)},
      {"q3_k_m", WeightRecipe::Mix(WeightMix::kQ3_K_M)},
  };
  for (const auto& c : kCases) {
    absl::StatusOr<DummyModelSpec> spec =
        ParseDummyModelSpec(absl::StrCat("dummy:stories110m:", c.dtype));
    ASSERT_TRUE(spec.ok()) << c.dtype << ": " << spec.status();
    EXPECT_EQ(spec->weights_recipe, c.recipe) << c.dtype;
    EXPECT_EQ(spec->weights_recipe->name(), c.dtype);
  }
  // An unknown dtype names every accepted one, the mixes included.
  absl::Status bad = ParseDummyModelSpec("dummy:stories110m:q4_k_s").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  for (const char* name : {"q8_0", "q4_0", "q6_k", "q5_k", "q4_k", "q3_k",
                           "q2_k", "q4_k_m", "q5_k_m", "q3_k_m"}) {
    EXPECT_TRUE(absl::StrContains(bad.message(), name)) << name << ": " << bad;
  }
}

TEST(DummyModelSpecTest, Errors) {
  EXPECT_FALSE(IsDummyModelSpec("model.gguf"));
  EXPECT_TRUE(IsDummyModelSpec("dummy:x"));
  EXPECT_EQ(ParseDummyModelSpec("model.gguf").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDummyModelSpec("dummy:").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDummyModelSpec("dummy:llama-1b:").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDummyModelSpec("dummy:llama-1b:f16:x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDummyModelSpec("dummy:llama-1b:q5_0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDummyModelSpec("dummy:llama-1b:Q4_K_M").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status unknown = ParseDummyModelSpec("dummy:gpt-5").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(unknown.message(), "stories110m"));
}

}  // namespace
}  // namespace paceline::engine
