// Weight recipes: their names, and the mixes against the files llama.cpp's
// llama-quantize wrote (../shared/oracle/models): every matrix of each K-quant
// file has the type the recipe gives it, and the memory plan of the recipe is
// the file's tensor bytes.

#include "engine/model/weight_recipe.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/model_shapes.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"

namespace paceline::engine {
namespace {

TEST(WeightRecipeTest, NamesRoundTrip) {
  const std::vector<std::string> names =
      absl::StrSplit(WeightsDtypeNames(), ", ");
  EXPECT_EQ(names.size(), 14u);
  for (const std::string& name : names) {
    absl::StatusOr<WeightRecipe> r = ParseWeightsDtype(name);
    ASSERT_TRUE(r.ok()) << name;
    EXPECT_EQ(r->name(), name);
  }
  EXPECT_EQ(*ParseWeightsDtype("q4_k"), WeightRecipe::Uniform(GgmlType::kQ4_K));
  EXPECT_EQ(*ParseWeightsDtype("q8_0"), WeightRecipe::Uniform(GgmlType::kQ8_0));
  EXPECT_EQ(ParseWeightsDtype("q4_k_m")->mix(), WeightMix::kQ4_K_M);
  EXPECT_EQ(ParseWeightsDtype("q4_k_m")->base_type(), GgmlType::kQ4_K);
  // q2_k is llama.cpp's Q2_K file type, a mix; a uniform Q2_K has no name.
  EXPECT_EQ(ParseWeightsDtype("q2_k")->mix(), WeightMix::kQ2_K);
  EXPECT_EQ(WeightRecipe::Uniform(GgmlType::kQ2_K).name(), "q2_k (uniform)");

  absl::Status bad = ParseWeightsDtype("Q4_K_M").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "q4_k_m")) << bad;
  EXPECT_FALSE(ParseWeightsDtype("").ok());
  EXPECT_FALSE(ParseWeightsDtype("q5_0").ok());
}

// llama.cpp's MXFP4_MOE (oracle-next's README: its expert tensors are
// MXFP4, its other matrices Q8_0).
TEST(WeightRecipeTest, Mxfp4MoeIsMxfp4ExpertsAndQ8_0Elsewhere) {
  absl::StatusOr<WeightRecipe> r = ParseWeightsDtype("mxfp4_moe");
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<ModelConfig> c = FindModelShape("gpt-oss-20b");
  ASSERT_TRUE(c.ok()) << c.status();
  int experts = 0;
  for (const ModelMatrix& m : ModelMatrices(*c)) {
    const bool expert = m.role == MatrixRole::kFfnGate ||
                        m.role == MatrixRole::kFfnUp ||
                        m.role == MatrixRole::kFfnDown;
    experts += expert;
    EXPECT_EQ(r->TypeOf(*c, m), expert ? GgmlType::kMXFP4 : GgmlType::kQ8_0)
        << static_cast<int>(m.role) << " layer " << m.layer;
  }
  EXPECT_EQ(experts, 3 * 24);
}

TEST(WeightRecipeTest, UniformIsOneTypeEverywhere) {
  absl::StatusOr<ModelConfig> c = FindModelShape("stories15m");
  ASSERT_TRUE(c.ok());
  const WeightRecipe r = WeightRecipe::Uniform(GgmlType::kQ4_K);
  for (const ModelMatrix& m : ModelMatrices(*c)) {
    EXPECT_EQ(r.TypeOf(*c, m), GgmlType::kQ4_K);
  }
}

// llama.cpp's fallback for widths that are not whole K blocks: stories15m
// is 288 wide (its FFN 768 is).
TEST(WeightRecipeTest, MixesFallBackOnWidthsOffTheBlock) {
  absl::StatusOr<ModelConfig> c = FindModelShape("stories15m");
  ASSERT_TRUE(c.ok());
  const WeightRecipe r = WeightRecipe::Mix(WeightMix::kQ4_K_M);
  const auto type = [&](MatrixRole role, int64_t layer, int64_t cols) {
    return r.TypeOf(*c, {role, layer, 1, cols});
  };
  EXPECT_EQ(type(MatrixRole::kOutput, -1, 288), GgmlType::kQ8_0);
  EXPECT_EQ(type(MatrixRole::kAttnQ, 2, 288), GgmlType::kQ5_0);
  EXPECT_EQ(type(MatrixRole::kFfnDown, 0, 768), GgmlType::kQ4_K);  // 6 layers:
  EXPECT_EQ(type(MatrixRole::kFfnDown, 2, 768), GgmlType::kQ6_K);  // 2, 5 more
  EXPECT_EQ(WeightRecipe::Mix(WeightMix::kQ2_K)
                .TypeOf(*c, {MatrixRole::kAttnQ, 0, 1, 288}),
            GgmlType::kQ4_0);
  EXPECT_EQ(r.TypeOf(*c, {MatrixRole::kAttnQ, 0, 1, 100}), GgmlType::kF16);
}

TEST(WeightRecipeTest, Q2KAttnVFollowsGroupedQueries) {
  absl::StatusOr<ModelConfig> c = FindModelShape("llama-3-8b");  // 32 / 8
  ASSERT_TRUE(c.ok());
  const WeightRecipe r = WeightRecipe::Mix(WeightMix::kQ2_K);
  const ModelMatrix v = {MatrixRole::kAttnV, 5, 1024, 4096};
  EXPECT_EQ(r.TypeOf(*c, v), GgmlType::kQ4_K);
  c->n_kv_heads = 32;
  EXPECT_EQ(r.TypeOf(*c, v), GgmlType::kQ3_K);
}

// ---- Against llama-quantize's files. ----

std::string TensorName(const ModelMatrix& m) {
  switch (m.role) {
    case MatrixRole::kTokenEmbd:
      return "token_embd.weight";
    case MatrixRole::kOutput:
      return "output.weight";
    default:
      break;
  }
  static constexpr const char* kNames[] = {"attn_q",      "attn_k",   "attn_v",
                                           "attn_output", "ffn_gate", "ffn_up",
                                           "ffn_down"};
  const int i = static_cast<int>(m.role) - static_cast<int>(MatrixRole::kAttnQ);
  return absl::StrCat("blk.", m.layer, ".", kNames[i], ".weight");
}

struct OracleFile {
  const char* file;
  const char* dtype;
};

class RecipeOracleTest : public ::testing::TestWithParam<OracleFile> {};

TEST_P(RecipeOracleTest, MatchesTheFilesTypesAndBytes) {
  const std::string path =
      absl::StrCat(::paceline::testing::SharedDir(), "/oracle/models/",
                   GetParam().file, ".gguf");
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) GTEST_SKIP() << "no oracle file: " << file.status();
  absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<WeightRecipe> recipe = ParseWeightsDtype(GetParam().dtype);
  ASSERT_TRUE(recipe.ok());
  for (const ModelMatrix& m : ModelMatrices(*config)) {
    const GgufTensorInfo* t = (*file)->FindTensor(TensorName(m));
    ASSERT_NE(t, nullptr) << TensorName(m);
    EXPECT_EQ(GetGgmlTypeTraits(recipe->TypeOf(*config, m)).name,
              GetGgmlTypeTraits(t->type).name)
        << TensorName(m);
  }
  // The plan of the recipe is what the file holds (its norms are F32 too).
  MemoryPlanRequest request;
  request.weights_recipe = *recipe;
  request.context = 1;
  request.sequences = 1;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(*config, request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // rope_freqs.weight (llama3rope) is not a parameter of the shape.
  uint64_t expected = *GgufTensorBytes(**file);
  if (const GgufTensorInfo* f = (*file)->FindTensor("rope_freqs.weight")) {
    expected -= f->size_bytes;
  }
  EXPECT_EQ(plan->weights_bytes, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Files, RecipeOracleTest,
    ::testing::Values(OracleFile{"llama-base-q4_k_m", "q4_k_m"},
                      OracleFile{"llama-base-q5_k_m", "q5_k_m"},
                      OracleFile{"llama-base-q3_k_m", "q3_k_m"},
                      OracleFile{"llama-base-q2_k", "q2_k"},
                      OracleFile{"llama-llama3rope-q4_k_m", "q4_k_m"},
                      OracleFile{"qwen2-base-q4_k_m", "q4_k_m"},
                      OracleFile{"qwen3-base-q4_k_m", "q4_k_m"}),
    [](const ::testing::TestParamInfo<OracleFile>& info) {
      std::string name = info.param.file;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace paceline::engine
