// The memory planner's arithmetic, checked against hand arithmetic, and the
// dtype parsers the CLI feeds it.

#include "engine/model/memory_plan.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weight_recipe.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

ModelConfig Llama7b() {
  absl::StatusOr<ModelConfig> c = FindModelShape("llama-7b");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

MemoryPlanRequest Request(GgmlType weights, int64_t context, int64_t sequences,
                          std::optional<uint64_t> memory = std::nullopt) {
  MemoryPlanRequest r;
  r.weights_recipe = WeightRecipe::Uniform(weights);
  r.context = context;
  r.sequences = sequences;
  r.memory_bytes = memory;
  return r;
}

MemoryPlan Plan(const ModelConfig& config, const MemoryPlanRequest& request) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(config, request);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : MemoryPlan{};
}

TEST(DtypeTest, KvNames) {
  EXPECT_EQ(*ParseKvDtype("f32"), GgmlType::kF32);
  EXPECT_EQ(*ParseKvDtype("f16"), GgmlType::kF16);
  EXPECT_EQ(*ParseKvDtype("bf16"), GgmlType::kBF16);
  EXPECT_EQ(*ParseKvDtype("q8_0"), GgmlType::kQ8_0);

  absl::Status bad = ParseKvDtype("q4_0").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "f32, f16, bf16, q8_0")) << bad;
  EXPECT_FALSE(ParseKvDtype("q4_k").ok());
  EXPECT_FALSE(ParseKvDtype("").ok());
  EXPECT_EQ(DtypeName(GgmlType::kQ4_K), "q4_k");
  EXPECT_EQ(DtypeName(GgmlType::kBF16), "bf16");
}

// Llama 2 7B: 6,738,415,616 parameters. The field's "7B at FP16 is ~14 GB"
// is 7e9 × 2; the exact figure is 13.48 GB.
TEST(PlanMemoryTest, Llama7bWeights) {
  const ModelConfig c = Llama7b();
  const MemoryPlan f16 = Plan(c, Request(GgmlType::kF16, 4096, 1));
  EXPECT_EQ(f16.parameters, 6'738'415'616);
  EXPECT_EQ(f16.weights_dtype, "f16");
  EXPECT_EQ(f16.weights_bytes, 13'476'831'232u);
  EXPECT_NEAR(static_cast<double>(f16.weights_bytes), 14e9, 0.6e9);

  EXPECT_EQ(Plan(c, Request(GgmlType::kBF16, 4096, 1)).weights_bytes,
            13'476'831'232u);
  EXPECT_EQ(Plan(c, Request(GgmlType::kF32, 4096, 1)).weights_bytes,
            26'953'662'464u);
  // Q8_0: 34 bytes per 32 weights.
  EXPECT_EQ(Plan(c, Request(GgmlType::kQ8_0, 4096, 1)).weights_bytes,
            6'738'415'616u / 32 * 34);
  // Q4_0: 18 bytes per 32 weights (4.5 bits): ~3.8 GB.
  const MemoryPlan q4 = Plan(c, Request(GgmlType::kQ4_0, 4096, 1));
  EXPECT_EQ(q4.weights_dtype, "q4_0");
  EXPECT_EQ(q4.weights_bytes, 3'790'358'784u);
  EXPECT_NEAR(static_cast<double>(q4.weights_bytes), 3.8e9, 0.05e9);
}

TEST(PlanMemoryTest, PartialQuantBlockRoundsUp) {
  ModelConfig c;  // a toy shape whose parameter count is not a multiple of 32
  c.architecture = "llama";
  c.n_layers = 1;
  c.n_embd = 3;
  c.n_heads = 1;
  c.n_kv_heads = 1;
  c.head_dim = 3;
  c.n_ff = 5;
  c.n_vocab = 7;
  c.context_length = 16;
  const int64_t params = c.ParameterCount();
  ASSERT_GT(params, 0);
  ASSERT_NE(params % 32, 0);
  const uint64_t blocks = static_cast<uint64_t>(params) / 32 + 1;
  EXPECT_EQ(Plan(c, Request(GgmlType::kQ4_0, 1, 1)).weights_bytes, blocks * 18);
  EXPECT_EQ(Plan(c, Request(GgmlType::kQ8_0, 1, 1)).weights_bytes, blocks * 34);
  EXPECT_EQ(Plan(c, Request(GgmlType::kF16, 1, 1)).weights_bytes,
            static_cast<uint64_t>(params) * 2);
}

// 2 × layers × kv_heads × head_dim × bytes per element (Q8_0: 34 bytes
// per 32 elements).
TEST(PlanMemoryTest, KvBytesPerToken) {
  struct Case {
    const char* shape;
    GgmlType kv;
    uint64_t expected;
  };
  const Case cases[] = {
      {"llama-7b", GgmlType::kF16, 2 * 32 * 32 * 128 * 2},    // 512 KiB
      {"llama-7b", GgmlType::kF32, 2 * 32 * 32 * 128 * 4},    // 1 MiB
      {"llama-3-8b", GgmlType::kF16, 2 * 32 * 8 * 128 * 2},   // 128 KiB
      {"llama-1b", GgmlType::kF16, 2 * 16 * 8 * 64 * 2},      // 32 KiB
      {"qwen3-0.6b", GgmlType::kBF16, 2 * 28 * 8 * 128 * 2},  // 112 KiB
      {"stories110m", GgmlType::kF32, 2 * 12 * 12 * 64 * 4},  // 72 KiB
      {"stories110m", GgmlType::kQ8_0, 2 * 12 * 12 * 64 / 32 * 34},
      {"llama-3-8b", GgmlType::kQ8_0, 2 * 32 * 8 * 128 / 32 * 34},
  };
  for (const Case& k : cases) {
    absl::StatusOr<ModelConfig> c = FindModelShape(k.shape);
    ASSERT_TRUE(c.ok()) << c.status();
    MemoryPlanRequest r = Request(GgmlType::kF16, 100, 3);
    r.kv_type = k.kv;
    const MemoryPlan plan = Plan(*c, r);
    EXPECT_EQ(plan.kv_bytes_per_token, k.expected) << k.shape;
    EXPECT_EQ(plan.kv_bytes, k.expected * 300) << k.shape;
    EXPECT_EQ(plan.kv_dtype, k.kv);
  }
}

TEST(PlanMemoryTest, HeadDimFallsBackToWidthOverHeads) {
  ModelConfig c = Llama7b();
  c.head_dim = 0;
  EXPECT_EQ(Plan(c, Request(GgmlType::kF16, 1, 1)).kv_bytes_per_token,
            524'288u);
}

TEST(PlanMemoryTest, TotalsAndRuleOfThumb) {
  const MemoryPlan p = Plan(Llama7b(), Request(GgmlType::kF16, 4096, 8));
  EXPECT_EQ(p.context, 4096);
  EXPECT_EQ(p.sequences, 8);
  EXPECT_EQ(p.kv_bytes, uint64_t{524'288} * 4096 * 8);  // 16 GiB
  EXPECT_EQ(p.kv_bytes, 16 * kGiB);
  EXPECT_EQ(p.total_bytes, 13'476'831'232u + 16 * kGiB);
  EXPECT_EQ(p.rule_of_thumb_bytes, 17'519'880'601u);  // floor(× 1.3)
  EXPECT_FALSE(p.fit.has_value());
}

TEST(PlanMemoryTest, SomeSequencesFit) {
  // (24 GiB − 13,476,831,232) / (512 KiB × 4096) = 5.72.
  const MemoryPlan p =
      Plan(Llama7b(), Request(GgmlType::kF16, 4096, 8, 24 * kGiB));
  ASSERT_TRUE(p.fit.has_value());
  EXPECT_EQ(p.fit->memory_bytes, 24 * kGiB);
  EXPECT_TRUE(p.fit->weights_fit);
  EXPECT_EQ(p.fit->weights_shortfall_bytes, 0u);
  EXPECT_EQ(p.fit->sequences_that_fit, 5);
  EXPECT_FALSE(p.fit->fits);
  EXPECT_EQ(p.fit->shortfall_bytes, p.total_bytes - 24 * kGiB);
  EXPECT_EQ(p.fit->shortfall_bytes, 4'886'896'640u);
}

TEST(PlanMemoryTest, AllRequestedSequencesFit) {
  // (24 GiB − 3,790,358,784) / 2 GiB = 10.23.
  const MemoryPlan p =
      Plan(Llama7b(), Request(GgmlType::kQ4_0, 4096, 8, 24 * kGiB));
  ASSERT_TRUE(p.fit.has_value());
  EXPECT_TRUE(p.fit->weights_fit);
  EXPECT_TRUE(p.fit->fits);
  EXPECT_EQ(p.fit->sequences_that_fit, 10);
  EXPECT_EQ(p.fit->shortfall_bytes, 0u);
}

TEST(PlanMemoryTest, ExactFitIsAFit) {
  MemoryPlan p = Plan(Llama7b(), Request(GgmlType::kF16, 4096, 2));
  p = Plan(Llama7b(), Request(GgmlType::kF16, 4096, 2, p.total_bytes));
  EXPECT_TRUE(p.fit->fits);
  EXPECT_EQ(p.fit->sequences_that_fit, 2);
  p = Plan(Llama7b(), Request(GgmlType::kF16, 4096, 2, p.total_bytes - 1));
  EXPECT_FALSE(p.fit->fits);
  EXPECT_EQ(p.fit->shortfall_bytes, 1u);
  EXPECT_EQ(p.fit->sequences_that_fit, 1);
}

TEST(PlanMemoryTest, WeightsAloneDoNotFit) {
  const MemoryPlan p =
      Plan(Llama7b(), Request(GgmlType::kF16, 4096, 8, 8'000'000'000));
  ASSERT_TRUE(p.fit.has_value());
  EXPECT_FALSE(p.fit->weights_fit);
  EXPECT_EQ(p.fit->weights_shortfall_bytes, 13'476'831'232u - 8'000'000'000);
  EXPECT_EQ(p.fit->sequences_that_fit, 0);
  EXPECT_FALSE(p.fit->fits);
  EXPECT_EQ(p.fit->shortfall_bytes, p.total_bytes - 8'000'000'000);

  const MemoryPlan zero = Plan(Llama7b(), Request(GgmlType::kF16, 1, 1, 0));
  EXPECT_FALSE(zero.fit->weights_fit);
  EXPECT_EQ(zero.fit->weights_shortfall_bytes, zero.weights_bytes);
}

TEST(PlanMemoryTest, FileBytesReplaceDtypeArithmetic) {
  MemoryPlanRequest r;
  r.weights_file_bytes = 1'185'000;
  r.context = 10;
  r.sequences = 1;
  const MemoryPlan p = Plan(Llama7b(), r);
  EXPECT_EQ(p.weights_dtype, "file");
  EXPECT_EQ(p.weights_bytes, 1'185'000u);
  EXPECT_EQ(p.parameters, 6'738'415'616);
  EXPECT_EQ(p.total_bytes, 1'185'000u + 524'288u * 10);
}

TEST(PlanMemoryTest, InvalidRequests) {
  const ModelConfig c = Llama7b();
  auto code = [&](const MemoryPlanRequest& r) {
    return PlanMemory(c, r).status().code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(Request(GgmlType::kF16, 0, 1)), kInvalid);
  EXPECT_EQ(code(Request(GgmlType::kF16, -4096, 1)), kInvalid);
  EXPECT_EQ(code(Request(GgmlType::kF16, 4096, 0)), kInvalid);
  EXPECT_EQ(code(Request(GgmlType::kF16, 4096, -1)), kInvalid);

  MemoryPlanRequest neither = Request(GgmlType::kF16, 1, 1);
  neither.weights_recipe.reset();
  EXPECT_EQ(code(neither), kInvalid);
  MemoryPlanRequest both = Request(GgmlType::kF16, 1, 1);
  both.weights_file_bytes = 100;
  EXPECT_EQ(code(both), kInvalid);
  MemoryPlanRequest quantized_kv = Request(GgmlType::kF16, 1, 1);
  quantized_kv.kv_type = GgmlType::kQ4_0;
  EXPECT_EQ(code(quantized_kv), kInvalid);

  ModelConfig no_layers = c;
  no_layers.n_layers = 0;
  EXPECT_EQ(
      PlanMemory(no_layers, Request(GgmlType::kF16, 1, 1)).status().code(),
      kInvalid);
  ModelConfig no_kv_heads = c;
  no_kv_heads.n_kv_heads = 0;
  EXPECT_EQ(
      PlanMemory(no_kv_heads, Request(GgmlType::kF16, 1, 1)).status().code(),
      kInvalid);
  EXPECT_EQ(
      PlanMemory(ModelConfig{}, Request(GgmlType::kF16, 1, 1)).status().code(),
      kInvalid);
}

TEST(PlanMemoryTest, OverflowIsAnErrorNotAWrap) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const ModelConfig c = Llama7b();
  constexpr auto kOutOfRange = absl::StatusCode::kOutOfRange;
  EXPECT_EQ(PlanMemory(c, Request(GgmlType::kF16, kMax, 1)).status().code(),
            kOutOfRange);
  EXPECT_EQ(
      PlanMemory(c, Request(GgmlType::kF16, 1 << 20, kMax)).status().code(),
      kOutOfRange);
  MemoryPlanRequest huge_file;
  huge_file.weights_file_bytes = std::numeric_limits<uint64_t>::max() - 10;
  huge_file.context = 1;
  huge_file.sequences = 1;
  EXPECT_EQ(PlanMemory(c, huge_file).status().code(), kOutOfRange);

  // Weights and KV fit in 64 bits, weights × 1.3 does not.
  huge_file.weights_file_bytes = std::numeric_limits<uint64_t>::max() / 10 * 8;
  EXPECT_EQ(PlanMemory(c, huge_file).status().code(), kOutOfRange);
}

TEST(PlanMemoryTest, RuleOfThumbIsExact) {
  MemoryPlanRequest r;
  r.context = 1;
  r.sequences = 1;
  for (uint64_t w : {0ull, 1ull, 9ull, 10ull, 13ull, 1'000'000'007ull}) {
    r.weights_file_bytes = w;
    EXPECT_EQ(Plan(Llama7b(), r).rule_of_thumb_bytes, w * 13 / 10) << w;
  }
  r.weights_file_bytes = std::numeric_limits<uint64_t>::max() / 13 * 10;
  const uint64_t w = *r.weights_file_bytes;
  EXPECT_EQ(Plan(Llama7b(), r).rule_of_thumb_bytes,
            w + w / 10 * 3 + w % 10 * 3 / 10);
}

// Uniform types: bits per weight are the type's block bytes x 8 / block size
// (Q4_K 144 x 8 / 256 = 4.5, Q6_K 6.5625); Llama 2 7B's parameter count is a
// multiple of 256, so the planned bytes are exactly that.
TEST(PlanMemoryTest, UniformTypesCostTheirTraitsBits) {
  for (GgmlType t :
       {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ6_K, GgmlType::kQ5_K,
        GgmlType::kQ4_K, GgmlType::kQ4_0, GgmlType::kQ3_K}) {
    const GgmlTypeTraits& traits = GetGgmlTypeTraits(t);
    const MemoryPlan p = Plan(Llama7b(), Request(t, 1, 1));
    EXPECT_DOUBLE_EQ(p.weights_bits_per_weight,
                     8.0 * traits.type_size / traits.block_size)
        << traits.name;
    EXPECT_EQ(p.weights_dtype, DtypeName(t));
  }
  EXPECT_DOUBLE_EQ(
      Plan(Llama7b(), Request(GgmlType::kQ4_K, 1, 1)).weights_bits_per_weight,
      4.5);
}

MemoryPlan PlanRecipe(const ModelConfig& config, absl::string_view name) {
  MemoryPlanRequest r;
  absl::StatusOr<WeightRecipe> recipe = ParseWeightsDtype(name);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  r.weights_recipe =
      recipe.ok() ? *recipe : WeightRecipe::Uniform(GgmlType::kF16);
  r.context = 1;
  r.sequences = 1;
  return Plan(config, r);
}

// A mix is sized matrix by matrix in the recipe's types, the remaining
// parameters (norms) in F32. For Llama 3 8B's shape Q4_K_M gives Q4_K to
// the embedding and to q, k, o, gate, up; Q6_K to the output head and, in 16
// of the 32 layers (UsesMoreBits: 0-3, 28-31 and every third between), to
// attn_v and ffn_down. That is 4.894 bits per weight (4.91 GB), near the
// ~4.9 GB of the Q4_K_M files published for Llama 3 8B.
TEST(PlanMemoryTest, Q4KMOfLlama3_8BSumsItsRecipe) {
  absl::StatusOr<ModelConfig> c = FindModelShape("llama-3-8b");
  ASSERT_TRUE(c.ok());
  const WeightRecipe recipe = WeightRecipe::Mix(WeightMix::kQ4_K_M);
  double bits = 0;
  int64_t matrix_parameters = 0;
  int q6_layers = 0;
  for (const ModelMatrix& m : ModelMatrices(*c)) {
    const GgmlTypeTraits& t = GetGgmlTypeTraits(recipe.TypeOf(*c, m));
    bits +=
        8.0 * static_cast<double>(m.rows * m.cols) * t.type_size / t.block_size;
    matrix_parameters += m.rows * m.cols;
    if (m.role == MatrixRole::kFfnDown && t.type == GgmlType::kQ6_K) {
      ++q6_layers;
    }
  }
  bits += 32.0 * static_cast<double>(c->ParameterCount() - matrix_parameters);
  EXPECT_EQ(q6_layers, 16);

  const MemoryPlan p = PlanRecipe(*c, "q4_k_m");
  EXPECT_EQ(p.weights_dtype, "q4_k_m");
  EXPECT_DOUBLE_EQ(static_cast<double>(p.weights_bytes), bits / 8);
  EXPECT_NEAR(p.weights_bits_per_weight,
              bits / static_cast<double>(c->ParameterCount()), 1e-9);
  EXPECT_GT(p.weights_bits_per_weight, 4.85);
  EXPECT_LT(p.weights_bits_per_weight, 4.95);
}

// A mixture of experts' mix sizes every expert in the recipe's types (the
// stacked expert matrices are ~90% of stories110m-moe): its bits per
// weight are Q4_K_M's, not F32's. Dummy weights of that recipe read the
// same matrix bytes the plan counts.
TEST(PlanMemoryTest, MixSizesEveryExpertOfAMixtureOfExperts) {
  absl::StatusOr<ModelConfig> c = FindModelShape("stories110m-moe");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->is_moe());
  const MemoryPlan p = PlanRecipe(*c, "q4_k_m");
  EXPECT_GT(p.weights_bits_per_weight, 4.5);
  EXPECT_LT(p.weights_bits_per_weight, 5.5);
  absl::StatusOr<std::unique_ptr<ModelWeights>> w =
      ModelWeights::Dummy(*c, WeightRecipe::Mix(WeightMix::kQ4_K_M), 0);
  ASSERT_TRUE(w.ok()) << w.status();
  // The plan adds the embedding (MatMulBytes leaves it out unless tied)
  // and the parameters outside ModelMatrices in F32: the norms and the
  // router (which MatMulBytes has already, hence an upper bound).
  int64_t matrix_parameters = 0;
  uint64_t embedding_bytes = 0;
  const WeightRecipe recipe = WeightRecipe::Mix(WeightMix::kQ4_K_M);
  for (const ModelMatrix& m : ModelMatrices(*c)) {
    matrix_parameters += m.rows * m.cols;
    if (m.role == MatrixRole::kTokenEmbd && !c->tied_output) {
      absl::StatusOr<uint64_t> row =
          GgmlRowBytes(recipe.TypeOf(*c, m), m.cols);
      ASSERT_TRUE(row.ok());
      embedding_bytes = *row * static_cast<uint64_t>(m.rows);
    }
  }
  const uint64_t rest_bytes =
      4 * static_cast<uint64_t>(c->ParameterCount() - matrix_parameters);
  EXPECT_GT(p.weights_bytes, (*w)->MatMulBytes() + embedding_bytes);
  EXPECT_LE(p.weights_bytes,
            (*w)->MatMulBytes() + embedding_bytes + rest_bytes);
}

TEST(PlanMemoryTest, MixesOrderByTheirBits) {
  absl::StatusOr<ModelConfig> c = FindModelShape("llama-3-8b");
  ASSERT_TRUE(c.ok());
  double prev = 0;
  for (absl::string_view name :
       {"q2_k", "q3_k_m", "q4_k", "q4_k_m", "q5_k", "q5_k_m", "q6_k"}) {
    const double bpw = PlanRecipe(*c, name).weights_bits_per_weight;
    EXPECT_GT(bpw, prev) << name;
    prev = bpw;
  }
  // Each mix costs more than its base type alone and less than Q6_K.
  EXPECT_GT(PlanRecipe(*c, "q4_k_m").weights_bits_per_weight, 4.5);
  EXPECT_LT(PlanRecipe(*c, "q5_k_m").weights_bits_per_weight, 6.5625);
}

}  // namespace
}  // namespace paceline::engine
