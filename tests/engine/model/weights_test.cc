#include "engine/model/weights.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/quantize.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weight_recipe.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine {
namespace {

const std::string& kStories = ::paceline::testing::kStories260KPath;

ModelConfig Small() {
  ModelConfig c;
  c.architecture = "qwen2";
  c.name = "small";
  c.n_layers = 2;
  c.n_embd = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.n_ff = 96;
  c.n_vocab = 260;
  c.context_length = 128;
  c.rope_layout = RopeLayout::kNeoxHalves;
  c.rope_dim = 16;
  c.tied_output = true;
  c.qkv_bias = true;
  return c;
}

TEST(WeightsTest, LoadsStoriesZeroCopy) {
  auto file = GgufFile::Open(kStories);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile* raw = file->get();
  const uint8_t* q0 = raw->FindTensor("blk.0.attn_q.weight")->data;
  const uint8_t* out = raw->FindTensor("output.weight")->data;
  auto w = ModelWeights::FromGguf(*std::move(file));
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig& c = (*w)->config();
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_kv_heads, 4);
  ASSERT_EQ((*w)->layers().size(), 5u);
  const LayerWeights& l0 = (*w)->layers()[0];
  EXPECT_EQ(l0.attn_q.data, q0);  // F32 has a kernel: no copy
  EXPECT_EQ(l0.attn_q.rows, 64);
  EXPECT_EQ(l0.attn_q.cols, 64);
  EXPECT_EQ(l0.attn_k.rows, 32);
  EXPECT_EQ(l0.ffn_down.rows, 64);
  EXPECT_EQ(l0.ffn_down.cols, 172);
  EXPECT_EQ(l0.ffn_down.row_bytes, 172u * 4);
  EXPECT_EQ((*w)->output().data, out);
  EXPECT_TRUE(l0.q_bias.empty());
  EXPECT_EQ(l0.attn_norm.size(), 64u);
  // Bytes per token: 5 layers of (64*64*2 + 64*32*2 + 3*64*172) floats plus
  // the 512 x 64 output head.
  EXPECT_EQ((*w)->MatMulBytesPerToken(),
            4u * (5 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172) + 512 * 64));
  std::vector<float> row(64);
  ASSERT_TRUE((*w)->Embed(1, row.data()).ok());
  EXPECT_NE(row[0], 0.0f);
}

// A two-layer llama whose matrices come in several types: F16, BF16, Q4_0
// and F32 have matmul kernels (kept in place); Q5_0 and F64 do not and are
// converted at load (to Q8_0 and F32), with one log line per kind.
class MixedTypesTest : public ::testing::Test {
 protected:
  static constexpr int64_t kEmbd = 32, kFf = 64, kVocab = 8;

  // Random rows encoded as `type`; `floats` receives what they decode to.
  std::string Encode(GgmlType type, int64_t rows, int64_t cols,
                     std::vector<float>* floats) {
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::vector<float> x(rows * cols);
    for (float& v : x) v = normal(rng_);
    std::string bytes(*GgmlRowBytes(type, rows * cols), '\0');
    auto* out = reinterpret_cast<uint8_t*>(bytes.data());
    if (type == GgmlType::kF64) {
      for (int64_t i = 0; i < rows * cols; ++i) {
        const double d = x[i];
        std::memcpy(out + 8 * i, &d, 8);
      }
    } else if (type == GgmlType::kQ5_0) {
      // 22-byte blocks: f16 d, u32 high bits, 16 bytes of low nibbles.
      for (int64_t b = 0; b < rows * cols / 32; ++b) {
        uint8_t* blk = out + 22 * b;
        const uint16_t d = FloatToHalf(0.03f);
        std::memcpy(blk, &d, 2);
        for (int i = 2; i < 22; ++i) blk[i] = static_cast<uint8_t>(rng_());
      }
    } else {
      EXPECT_TRUE(QuantizeRow(type, x.data(), rows * cols, out).ok());
    }
    floats->resize(rows * cols);
    EXPECT_TRUE(DequantizeRow(type, out, floats->data(), rows * cols).ok());
    return bytes;
  }

  std::string Build() {
    using testing::Str;
    using testing::U32;
    testing::GgufBuilder b;
    b.Add("general.architecture", Str("llama"));
    b.Add("llama.block_count", U32(2));
    b.Add("llama.embedding_length", U32(kEmbd));
    b.Add("llama.feed_forward_length", U32(kFf));
    b.Add("llama.context_length", U32(64));
    b.Add("llama.attention.head_count", U32(2));
    b.Add("llama.attention.head_count_kv", U32(1));
    const auto add = [&](const std::string& name, GgmlType type, int64_t rows,
                         int64_t cols) {
      std::vector<float> floats;
      const std::string bytes = Encode(type, rows, cols, &floats);
      source_[name] = floats;
      b.AddTensor(name, type,
                  {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)},
                  bytes);
    };
    std::vector<float> ones(kEmbd, 1.0f);
    add("token_embd.weight", GgmlType::kF16, kVocab, kEmbd);
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = "blk." + std::to_string(layer) + ".";
      b.AddF32Tensor(p + "attn_norm.weight", {kEmbd}, ones);
      add(p + "attn_q.weight", GgmlType::kQ5_0, kEmbd, kEmbd);
      add(p + "attn_k.weight", GgmlType::kF64, 16, kEmbd);
      add(p + "attn_v.weight", GgmlType::kBF16, 16, kEmbd);
      add(p + "attn_output.weight", GgmlType::kQ4_0, kEmbd, kEmbd);
      b.AddF32Tensor(p + "ffn_norm.weight", {kEmbd}, ones);
      add(p + "ffn_gate.weight", GgmlType::kQ8_0, kFf, kEmbd);
      add(p + "ffn_up.weight", GgmlType::kF32, kFf, kEmbd);
      add(p + "ffn_down.weight", GgmlType::kF16, kEmbd, kFf);
    }
    b.AddF32Tensor("output_norm.weight", {kEmbd}, ones);
    add("output.weight", GgmlType::kQ5_0, kVocab, kEmbd);
    return b.Build();
  }

  // Decodes a view's rows.
  static std::vector<float> Decode(const WeightView& v) {
    std::vector<float> out(v.rows * v.cols);
    for (int64_t r = 0; r < v.rows; ++r) {
      EXPECT_TRUE(
          DequantizeRow(v.type,
                        static_cast<const uint8_t*>(v.data) + r * v.row_bytes,
                        &out[r * v.cols], v.cols)
              .ok());
    }
    return out;
  }

  std::mt19937 rng_{17};
  std::map<std::string, std::vector<float>> source_;
};

TEST_F(MixedTypesTest, ConvertsTypesWithoutAKernelAndLogsIt) {
  const std::string bytes = Build();
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_TRUE(file.ok()) << file.status();
  const uint8_t* v_data = (*file)->FindTensor("blk.1.attn_v.weight")->data;
  ::testing::internal::CaptureStderr();
  auto w = ModelWeights::FromGguf(*std::move(file));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NE(log.find("converted 3 tensors from Q5_0 to Q8_0 at load"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("converted 2 tensors from F64 to F32 at load"),
            std::string::npos)
      << log;

  const LayerWeights& l1 = (*w)->layers()[1];
  EXPECT_EQ(l1.attn_v.data, v_data);  // BF16: in place
  EXPECT_EQ(l1.attn_v.type, GgmlType::kBF16);
  EXPECT_EQ(l1.attn_output.type, GgmlType::kQ4_0);
  EXPECT_EQ(l1.ffn_gate.type, GgmlType::kQ8_0);
  EXPECT_EQ(l1.attn_k.type, GgmlType::kF32);
  EXPECT_EQ(Decode(l1.attn_k), source_["blk.1.attn_k.weight"]);  // exact
  ASSERT_EQ(l1.attn_q.type, GgmlType::kQ8_0);
  ASSERT_EQ((*w)->output().type, GgmlType::kQ8_0);
  for (const auto& [view, name] :
       {std::pair{&l1.attn_q, "blk.1.attn_q.weight"},
        std::pair{&(*w)->output(), "output.weight"}}) {
    const std::vector<float> got = Decode(*view);
    const std::vector<float>& want = source_[name];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      // Q5_0 values here are at most 16 * 0.03; Q8_0 steps are max / 127.
      EXPECT_NEAR(got[i], want[i], 0.48f / 127) << name << " " << i;
    }
  }
}

// A file's bytes with the tiny model plus `keys`, loaded.
absl::StatusOr<std::unique_ptr<ModelWeights>> LoadTinyWith(
    const std::vector<std::pair<std::string, testing::GgufValueBytes>>& keys,
    std::string* bytes) {
  testing::GgufBuilder b;
  testing::AddTinyModel(b, testing::TinyModelSpec{});
  for (const auto& [key, value] : keys) b.Add(key, value);
  *bytes = b.Build();
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  if (!file.ok()) return file.status();
  return ModelWeights::FromGguf(*std::move(file));
}

TEST(WeightsTest, YarnScalingLoadsAndUnknownKindsStayAnError) {
  std::string bytes;
  auto w =
      LoadTinyWith({{"llama.rope.scaling.type", testing::Str("yarn")},
                    {"llama.rope.scaling.factor", testing::F32(4.0f)},
                    {"llama.rope.scaling.yarn_beta_fast", testing::F32(16.0f)}},
                   &bytes);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->config().rope_scaling, RopeScaling::kYarn);
  // The training context it extends defaults to the context length.
  EXPECT_EQ((*w)->config().rope_original_context, 64);
  EXPECT_EQ((*w)->config().yarn_beta_fast, 16.0);

  const absl::Status s =
      LoadTinyWith({{"llama.rope.scaling.type", testing::Str("longrope")}},
                   &bytes)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("llama.rope.scaling.type"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("longrope"), std::string::npos) << s;
}

TEST(WeightsTest, DummyIsDeterministicAndSeeded) {
  auto a = ModelWeights::Dummy(Small(), GgmlType::kF32, 5);
  auto b = ModelWeights::Dummy(Small(), GgmlType::kF32, 5);
  auto c = ModelWeights::Dummy(Small(), GgmlType::kF32, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto bytes = [](const WeightView& v) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    return std::vector<uint8_t>(p, p + v.rows * v.row_bytes);
  };
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(bytes((*a)->layers()[l].ffn_up), bytes((*b)->layers()[l].ffn_up));
    EXPECT_NE(bytes((*a)->layers()[l].ffn_up), bytes((*c)->layers()[l].ffn_up));
    EXPECT_EQ((*a)->layers()[l].q_bias, (*b)->layers()[l].q_bias);
    EXPECT_EQ((*a)->layers()[l].q_bias.size(), 64u);
    EXPECT_EQ((*a)->layers()[l].k_bias.size(), 32u);
  }
  // Tied: the output head is the embedding.
  EXPECT_EQ((*a)->output().data, (*a)->token_embd().data);
}

TEST(WeightsTest, DummyHasTheRequestedStatistics) {
  auto w = ModelWeights::Dummy(Small(), GgmlType::kF32, 1);
  ASSERT_TRUE(w.ok());
  const WeightView& v = (*w)->layers()[1].ffn_gate;  // 96 x 64
  const auto* f = static_cast<const float*>(v.data);
  double sum = 0, sq = 0;
  const int64_t n = v.rows * v.cols;
  for (int64_t i = 0; i < n; ++i) {
    sum += f[i];
    sq += double{f[i]} * f[i];
  }
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.001);
  double norm_mean = 0;
  for (float x : (*w)->layers()[0].attn_norm) norm_mean += x;
  EXPECT_NEAR(norm_mean / 64, 1.0, 0.01);
}

TEST(WeightsTest, DummyInEachTypeDequantizesCloseToF32) {
  auto ref = ModelWeights::Dummy(Small(), GgmlType::kF32, 3);
  ASSERT_TRUE(ref.ok());
  const auto* r = static_cast<const float*>((*ref)->layers()[0].attn_q.data);
  for (GgmlType type :
       {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    auto w = ModelWeights::Dummy(Small(), type, 3);
    ASSERT_TRUE(w.ok()) << w.status();
    const WeightView& v = (*w)->layers()[0].attn_q;
    EXPECT_EQ(v.type, type);
    std::vector<float> row(v.cols);
    double max_err = 0;
    for (int64_t i = 0; i < v.rows; ++i) {
      ASSERT_TRUE(
          DequantizeRow(type,
                        static_cast<const uint8_t*>(v.data) + i * v.row_bytes,
                        row.data(), v.cols)
              .ok());
      for (int64_t j = 0; j < v.cols; ++j) {
        max_err =
            std::max(max_err, double{std::fabs(row[j] - r[i * v.cols + j])});
      }
    }
    // Q4_0's step is max|x| / 8 per block: ~0.01 for 0.02-std weights.
    EXPECT_LT(max_err, type == GgmlType::kQ4_0 ? 0.02 : 0.002)
        << GetGgmlTypeTraits(type).name;
  }
}

TEST(WeightsTest, DummyRejectsBadTypesAndWidths) {
  // Small() is 64 wide: not whole K-quant blocks.
  const absl::Status k =
      ModelWeights::Dummy(Small(), GgmlType::kQ4_K, 1).status();
  EXPECT_EQ(k.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.message().find("multiples of 256"), std::string::npos) << k;
  const absl::Status mix =
      ModelWeights::Dummy(Small(), WeightRecipe::Mix(WeightMix::kQ4_K_M), 1)
          .status();
  EXPECT_EQ(mix.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mix.message().find("q4_k_m"), std::string::npos) << mix;
  const absl::Status q5 =
      ModelWeights::Dummy(Small(), GgmlType::kQ5_0, 1).status();
  EXPECT_EQ(q5.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(q5.message().find("q4_k_m"), std::string::npos)
      << q5;  // lists them
  ModelConfig odd = Small();
  odd.n_ff = 100;  // not a multiple of 32
  EXPECT_FALSE(ModelWeights::Dummy(odd, GgmlType::kQ8_0, 1).ok());
  EXPECT_TRUE(ModelWeights::Dummy(odd, GgmlType::kF16, 1).ok());
  ModelConfig yarn = Small();  // yarn needs the context it extends
  yarn.rope_scaling = RopeScaling::kYarn;
  yarn.rope_scaling_factor = 4;
  EXPECT_EQ(ModelWeights::Dummy(yarn, GgmlType::kF32, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  yarn.rope_original_context = 32;
  EXPECT_TRUE(ModelWeights::Dummy(yarn, GgmlType::kF32, 1).ok());
}

TEST(WeightsTest, NamedShapesBuild) {
  // The smallest registry shape end to end (15M parameters, quick).
  auto shape = FindModelShape("stories15m");
  ASSERT_TRUE(shape.ok());
  auto w = ModelWeights::Dummy(*shape, GgmlType::kQ8_0, 0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->layers().size(), 6u);
  EXPECT_EQ((*w)->output().rows, 32000);
}

// A shape whose widths are whole K-quant blocks: 8 layers, so that
// Q4_K_M's UsesMoreBits picks some layers (0, 3, 6, 7) and not others.
ModelConfig KBlocks(bool tied) {
  ModelConfig c;
  c.architecture = "llama";
  c.name = "kblocks";
  c.n_layers = 8;
  c.n_embd = 256;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.n_ff = 512;
  c.n_vocab = 96;
  c.context_length = 64;
  c.rope_layout = RopeLayout::kAdjacentPairs;
  c.rope_dim = 64;
  c.tied_output = tied;
  return c;
}

// Every matrix of `w`, with the role the recipe knows it by.
std::vector<std::pair<ModelMatrix, const WeightView*>> Matrices(
    const ModelWeights& w) {
  std::vector<std::pair<ModelMatrix, const WeightView*>> out;
  const auto add = [&](MatrixRole role, int64_t layer, const WeightView& v) {
    out.push_back({{role, layer, v.rows, v.cols}, &v});
  };
  add(MatrixRole::kTokenEmbd, -1, w.token_embd());
  if (!w.config().tied_output) add(MatrixRole::kOutput, -1, w.output());
  for (int64_t i = 0; i < w.config().n_layers; ++i) {
    const LayerWeights& l = w.layers()[i];
    add(MatrixRole::kAttnQ, i, l.attn_q);
    add(MatrixRole::kAttnK, i, l.attn_k);
    add(MatrixRole::kAttnV, i, l.attn_v);
    add(MatrixRole::kAttnOutput, i, l.attn_output);
    add(MatrixRole::kFfnGate, i, l.ffn_gate);
    add(MatrixRole::kFfnUp, i, l.ffn_up);
    add(MatrixRole::kFfnDown, i, l.ffn_down);
  }
  return out;
}

std::vector<float> DecodeAll(const WeightView& v) {
  std::vector<float> out(v.rows * v.cols);
  for (int64_t r = 0; r < v.rows; ++r) {
    const absl::Status s = DequantizeRow(
        v.type, static_cast<const uint8_t*>(v.data) + r * v.row_bytes,
        out.data() + r * v.cols, v.cols);
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

// Each K type: every matrix is stored in it, and decodes close to the F32
// dummy of the same seed (the same random numbers before quantization):
// relative RMS error within tests/engine/gguf/quantize_k_test.cc's bounds for
// normal data, and the requested statistics.
TEST(WeightsTest, DummyInEachKTypeDequantizesCloseToF32) {
  const ModelConfig c = KBlocks(/*tied=*/false);
  auto ref = ModelWeights::Dummy(c, GgmlType::kF32, 4);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const struct {
    GgmlType type;
    double bound;  // 1.25 x the derived relative RMS error
  } kTypes[] = {{GgmlType::kQ2_K, 0.43},
                {GgmlType::kQ3_K, 0.18},
                {GgmlType::kQ4_K, 0.099},
                {GgmlType::kQ5_K, 0.048},
                {GgmlType::kQ6_K, 0.023}};
  for (const auto& k : kTypes) {
    auto w = ModelWeights::Dummy(c, k.type, 4);
    ASSERT_TRUE(w.ok()) << w.status();
    const auto got = Matrices(**w);
    const auto want = Matrices(**ref);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const WeightView& v = *got[i].second;
      ASSERT_EQ(v.type, k.type);
      ASSERT_EQ(v.row_bytes, *GgmlRowBytes(k.type, v.cols));
    }
    const std::vector<float> x = DecodeAll((*ref)->layers()[3].ffn_up);
    const std::vector<float> y = DecodeAll((*w)->layers()[3].ffn_up);
    double err = 0, sq = 0, sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (double{y[i]} - x[i]) * (y[i] - x[i]);
      sq += double{y[i]} * y[i];
      sum += y[i];
    }
    const double n = static_cast<double>(x.size());
    EXPECT_LT(std::sqrt(err / n) / 0.02, k.bound)
        << GetGgmlTypeTraits(k.type).name;
    EXPECT_NEAR(sum / n, 0.0, 0.002);
    EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.02 * k.bound);
    // The embedding reads back through Embed like any other type.
    std::vector<float> row(c.n_embd);
    ASSERT_TRUE((*w)->Embed(7, row.data()).ok());
  }
}

// Q4_K_M: each matrix in the type its recipe gives (llama.cpp's choice,
// checked against llama-quantize's files in weight_recipe_test.cc): Q6_K for
// the output head and for attn_v / ffn_down in the layers that use more
// bits, Q4_K elsewhere; tied, the embedding is the Q6_K head.
TEST(WeightsTest, DummyQ4KMFollowsItsRecipe) {
  const WeightRecipe recipe = WeightRecipe::Mix(WeightMix::kQ4_K_M);
  for (bool tied : {false, true}) {
    const ModelConfig c = KBlocks(tied);
    auto w = ModelWeights::Dummy(c, recipe, 2);
    ASSERT_TRUE(w.ok()) << w.status();
    uint64_t read_bytes = 0;
    int q6 = 0;
    for (const auto& [m, v] : Matrices(**w)) {
      EXPECT_EQ(v->type, recipe.TypeOf(c, m)) << int(m.role) << " " << m.layer;
      EXPECT_EQ(v->row_bytes, *GgmlRowBytes(v->type, v->cols));
      q6 += v->type == GgmlType::kQ6_K ? 1 : 0;
      if (m.role != MatrixRole::kTokenEmbd || tied) {
        read_bytes += v->rows * v->row_bytes;
      }
    }
    // 4 of the 8 layers use more bits (attn_v + ffn_down each), and the head.
    EXPECT_EQ(q6, 2 * 4 + 1);
    EXPECT_EQ((*w)->output().type, GgmlType::kQ6_K);
    EXPECT_EQ((*w)->token_embd().type,
              tied ? GgmlType::kQ6_K : GgmlType::kQ4_K);
    EXPECT_EQ((*w)->layers()[0].ffn_down.type, GgmlType::kQ6_K);
    EXPECT_EQ((*w)->layers()[1].ffn_down.type, GgmlType::kQ4_K);
    EXPECT_EQ((*w)->MatMulBytesPerToken(), read_bytes);
  }
}

}  // namespace
}  // namespace paceline::engine
