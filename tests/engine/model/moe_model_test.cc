// qwen3moe model files (GgufBuilder-made): the expert keys and their
// checks, the 3-D expert tensors' shape checks, the per-expert views into
// them, and the active-expert byte accounting.

#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::engine {
namespace {

using ::paceline::testing::F32;
using ::paceline::testing::GgufBuilder;
using ::paceline::testing::GgufValueBytes;
using ::paceline::testing::Str;
using ::paceline::testing::U32;

constexpr uint64_t kEmbd = 32, kHeads = 2, kHeadDim = 16, kKv = 32;
constexpr uint64_t kExperts = 4, kUsed = 2, kFfExp = 32, kVocab = 8;

struct MoeFile {
  uint64_t n_expert = kExperts;
  uint64_t n_expert_used = kUsed;
  bool write_ff_exp = true;
  // The expert_count key's value (the tensors keep n_expert); absent when
  // empty.
  std::optional<uint32_t> expert_count_key = kExperts;
  std::string skip_tensor;  // leave this tensor out
  // Replaces blk.1.ffn_down_exps.weight's dims.
  std::optional<std::vector<uint64_t>> down_dims;
  std::vector<std::pair<std::string, GgufValueBytes>> extra_keys;
};

// F32 values v[i] = row index of the stacked matrix (so expert e's row r
// of an (n_expert * rows, cols) tensor holds e * rows + r).
std::vector<float> RowIndexValues(uint64_t rows, uint64_t cols) {
  std::vector<float> v(rows * cols);
  for (uint64_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i / cols);
  return v;
}

std::string BuildMoe(const MoeFile& m) {
  GgufBuilder b;
  const std::string a = "qwen3moe";
  b.Add("general.architecture", Str(a));
  b.Add(a + ".block_count", U32(2));
  b.Add(a + ".embedding_length", U32(kEmbd));
  b.Add(a + ".feed_forward_length", U32(64));
  b.Add(a + ".context_length", U32(64));
  b.Add(a + ".attention.head_count", U32(kHeads));
  b.Add(a + ".attention.head_count_kv", U32(kHeads));
  b.Add(a + ".attention.key_length", U32(kHeadDim));
  b.Add(a + ".attention.layer_norm_rms_epsilon", F32(1e-6f));
  b.Add(a + ".vocab_size", U32(kVocab));
  if (m.expert_count_key.has_value()) {
    b.Add(a + ".expert_count", U32(*m.expert_count_key));
  }
  b.Add(a + ".expert_used_count", U32(static_cast<uint32_t>(m.n_expert_used)));
  if (m.write_ff_exp) b.Add(a + ".expert_feed_forward_length", U32(kFfExp));
  for (const auto& [key, value] : m.extra_keys) b.Add(a + "." + key, value);
  const auto add = [&](const std::string& name, std::vector<uint64_t> dims,
                       std::vector<float> values = {}) {
    if (name != m.skip_tensor) b.AddF32Tensor(name, std::move(dims), values);
  };
  add("token_embd.weight", {kEmbd, kVocab});
  add("output_norm.weight", {kEmbd});
  add("output.weight", {kEmbd, kVocab});
  for (int i = 0; i < 2; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    add(p + "attn_norm.weight", {kEmbd});
    add(p + "attn_q.weight", {kEmbd, kKv});
    add(p + "attn_k.weight", {kEmbd, kKv});
    add(p + "attn_v.weight", {kEmbd, kKv});
    add(p + "attn_output.weight", {kKv, kEmbd});
    add(p + "attn_q_norm.weight", {kHeadDim});
    add(p + "attn_k_norm.weight", {kHeadDim});
    add(p + "ffn_norm.weight", {kEmbd});
    add(p + "ffn_gate_inp.weight", {kEmbd, m.n_expert});
    add(p + "ffn_gate_exps.weight", {kEmbd, kFfExp, m.n_expert},
        RowIndexValues(kFfExp * m.n_expert, kEmbd));
    add(p + "ffn_up_exps.weight", {kEmbd, kFfExp, m.n_expert});
    std::vector<uint64_t> down = {kFfExp, kEmbd, m.n_expert};
    if (i == 1 && m.down_dims.has_value()) down = *m.down_dims;
    add(p + "ffn_down_exps.weight", down,
        RowIndexValues(down[1] * down[2], down[0]));
  }
  return b.Build();
}

// The bytes stay alive for the whole test binary (FromBuffer's contract).
absl::StatusOr<std::unique_ptr<GgufFile>> Open(std::string bytes) {
  static auto* kept = new std::list<std::string>();
  kept->push_back(std::move(bytes));
  return GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(kept->back().data()),
      kept->back().size());
}

absl::StatusOr<std::unique_ptr<ModelWeights>> Load(const MoeFile& m) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = Open(BuildMoe(m));
  if (!file.ok()) return file.status();
  return ModelWeights::FromGguf(*std::move(file));
}

void ExpectError(const MoeFile& m, absl::StatusCode code,
                 absl::string_view names) {
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = Load(m);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), code) << w.status();
  EXPECT_TRUE(absl::StrContains(w.status().message(), names)) << w.status();
}

TEST(MoeModelTest, ReadsTheExpertKeys) {
  auto file = Open(BuildMoe({}));
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = ModelConfigFromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_moe());
  EXPECT_EQ(c->n_expert, 4);
  EXPECT_EQ(c->n_expert_used, 2);
  EXPECT_EQ(c->n_ff_exp, 32);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeoxHalves);
  // Every tensor's elements: ParameterCount counts what the file holds.
  int64_t elements = 0;
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    elements += t.num_elements();
  }
  EXPECT_EQ(c->ParameterCount(), elements);
  EXPECT_EQ(c->ActiveParameterCount(),
            elements - 2 * (4 - 2) * 3 * int64_t{kEmbd * kFfExp});
}

TEST(MoeModelTest, ExpertWidthDefaultsLikeLlamaCpp) {
  MoeFile m;
  m.write_ff_exp = false;  // feed_forward_length / expert_used_count
  auto file = Open(BuildMoe(m));
  ASSERT_TRUE(file.ok());
  auto c = ModelConfigFromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_ff_exp, 64 / 2);
}

TEST(MoeModelTest, MoreExpertsUsedThanThereAreFails) {
  MoeFile m;
  m.n_expert_used = 5;
  ExpectError(m, absl::StatusCode::kInvalidArgument,
              "qwen3moe.expert_used_count");
}

TEST(MoeModelTest, MissingOrZeroExpertCountFailsNamingTheKey) {
  MoeFile m;
  m.expert_count_key.reset();
  ExpectError(m, absl::StatusCode::kNotFound, "qwen3moe.expert_count");
  m.expert_count_key = 0;
  ExpectError(m, absl::StatusCode::kInvalidArgument, "qwen3moe.expert_count");
}

TEST(MoeModelTest, KeysThatChangeTheRoutingAreRefused) {
  const std::pair<std::string, GgufValueBytes> cases[] = {
      {"expert_group_count", U32(2)},
      {"expert_shared_count", U32(1)},
      {"expert_gating_func", U32(2)},  // sigmoid
      {"expert_weights_norm", paceline::testing::Bool(false)},
      {"expert_weights_scale", F32(2.5f)},
  };
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key);
    MoeFile m;
    m.extra_keys = {{key, value}};
    ExpectError(m, absl::StatusCode::kUnimplemented, "qwen3moe." + key);
  }
  // The values qwen3moe's graph has are accepted.
  MoeFile same;
  same.extra_keys = {{"expert_gating_func", U32(1)},
                     {"expert_weights_norm", paceline::testing::Bool(true)},
                     {"expert_weights_scale", F32(1.0f)},
                     {"expert_group_count", U32(1)}};
  EXPECT_TRUE(Load(same).ok()) << Load(same).status();
}

TEST(MoeModelTest, MissingExpertTensorFailsNamingIt) {
  for (const char* name :
       {"blk.1.ffn_up_exps.weight", "blk.0.ffn_gate_inp.weight",
        "blk.0.ffn_down_exps.weight"}) {
    MoeFile m;
    m.skip_tensor = name;
    ExpectError(m, absl::StatusCode::kNotFound, name);
  }
}

TEST(MoeModelTest, MisShapedExpertTensorFailsNamingIt) {
  MoeFile m;
  m.down_dims = std::vector<uint64_t>{kFfExp, kEmbd, kExperts - 1};
  ExpectError(m, absl::StatusCode::kInvalidArgument,
              "tensor 'blk.1.ffn_down_exps.weight' has shape [32, 32, 3], "
              "want [32, 32, 4]");
  m.down_dims = std::vector<uint64_t>{kFfExp, kEmbd * kExperts};  // 2-D
  ExpectError(m, absl::StatusCode::kInvalidArgument,
              "blk.1.ffn_down_exps.weight");
}

// Expert e's views are its slice of the 3-D tensors: row r of expert e's
// gate holds the stacked row e * n_ff_exp + r.
TEST(MoeModelTest, ExpertViewsAreSlicesOfTheStackedTensors) {
  auto w = Load({});
  ASSERT_TRUE(w.ok()) << w.status();
  const LayerWeights& l = (*w)->layers()[0];
  EXPECT_EQ(l.ffn_gate.rows, 0);  // no dense FFN
  EXPECT_EQ(l.ffn_gate_inp.rows, 4);
  EXPECT_EQ(l.ffn_gate_inp.cols, 32);
  ASSERT_EQ(l.experts.size(), kExperts);
  std::vector<float> row(kEmbd);
  for (uint64_t e = 0; e < kExperts; ++e) {
    const ExpertWeights& x = l.experts[e];
    EXPECT_EQ(x.gate.rows, 32);
    EXPECT_EQ(x.gate.cols, 32);
    EXPECT_EQ(x.down.rows, 32);
    EXPECT_EQ(x.down.cols, 32);
    for (int64_t r : {int64_t{0}, int64_t{31}}) {
      const auto* bytes =
          static_cast<const uint8_t*>(x.gate.data) + r * x.gate.row_bytes;
      ASSERT_TRUE(DequantizeRow(x.gate.type, bytes, row.data(), 32).ok());
      EXPECT_EQ(row[0], static_cast<float>(e * kFfExp + r)) << e << " " << r;
      const auto* down =
          static_cast<const uint8_t*>(x.down.data) + r * x.down.row_bytes;
      ASSERT_TRUE(DequantizeRow(x.down.type, down, row.data(), 32).ok());
      EXPECT_EQ(row[31], static_cast<float>(e * kEmbd + r)) << e << " " << r;
    }
  }
}

// Resident: every expert. Per token: the router and 2 of 4 experts.
TEST(MoeModelTest, BytesPerTokenCountOnlyTheUsedExperts) {
  auto w = Load({});
  ASSERT_TRUE(w.ok()) << w.status();
  const uint64_t expert = 3 * kEmbd * kFfExp * 4;  // F32
  EXPECT_EQ((*w)->ExpertBytes(0), expert);
  EXPECT_EQ((*w)->MatMulBytes() - (*w)->MatMulBytesPerToken(),
            2 * (kExperts - kUsed) * expert);
  auto file = Open(BuildMoe({}));
  ASSERT_TRUE(file.ok());
  auto c = ModelConfigFromGguf(**file);
  ASSERT_TRUE(c.ok());
  auto total = GgufTensorBytes(**file);
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(GgufTensorBytesPerToken(**file, *c),
            *total - kEmbd * kVocab * 4 - 2 * (kExperts - kUsed) * expert);
}

// Dummy MoE weights have the same structure as a file's, in each type.
TEST(MoeModelTest, DummyWeightsHaveEveryExpert) {
  auto file = Open(BuildMoe({}));
  ASSERT_TRUE(file.ok());
  auto c = ModelConfigFromGguf(**file);
  ASSERT_TRUE(c.ok());
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    auto w = ModelWeights::Dummy(*c, type, 3);
    ASSERT_TRUE(w.ok()) << w.status();
    const LayerWeights& l = (*w)->layers()[1];
    ASSERT_EQ(l.experts.size(), kExperts);
    EXPECT_EQ(l.ffn_gate_inp.type, GgmlType::kF32);
    EXPECT_EQ(l.experts[3].up.type, type);
    EXPECT_NE(std::memcmp(l.experts[0].gate.data, l.experts[1].gate.data,
                          l.experts[0].gate.row_bytes),
              0);
  }
}

}  // namespace
}  // namespace paceline::engine
