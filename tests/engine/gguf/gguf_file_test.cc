#include "engine/gguf/gguf_file.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine {
namespace {

namespace gt = ::paceline::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromBuffer(reinterpret_cast<const uint8_t*>(bytes.data()),
                              bytes.size());
}

TEST(GgufFileTest, ParsesEveryScalarType) {
  const std::string bytes =
      gt::GgufBuilder()
          .Add("u8", gt::U8(250))
          .Add("i8", gt::I8(-7))
          .Add("u16", gt::U16(65000))
          .Add("i16", gt::I16(-30000))
          .Add("u32", gt::U32(4000000000u))
          .Add("i32", gt::I32(-2000000000))
          .Add("f32", gt::F32(1.5f))
          .Add("bool", gt::Bool(true))
          .Add("str", gt::Str("hello"))
          .Add("u64", gt::U64(uint64_t{1} << 63))
          .Add("i64", gt::I64(std::numeric_limits<int64_t>::min()))
          .Add("f64", gt::F64(-2.25))
          .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), 12u);
  // File order is kept.
  EXPECT_EQ(f.metadata()[0].first, "u8");
  EXPECT_EQ(f.metadata()[11].first, "f64");

  EXPECT_EQ(f.Find("u8")->type, GgufValueType::kUint8);
  EXPECT_EQ(f.Find("u8")->u, 250u);
  EXPECT_EQ(f.Find("i8")->i, -7);
  EXPECT_EQ(f.Find("u16")->u, 65000u);
  EXPECT_EQ(f.Find("i16")->i, -30000);
  EXPECT_EQ(f.Find("u32")->u, 4000000000u);
  EXPECT_EQ(f.Find("i32")->i, -2000000000);
  EXPECT_EQ(f.Find("f32")->type, GgufValueType::kFloat32);
  EXPECT_EQ(f.Find("f32")->f, 1.5);
  EXPECT_EQ(f.Find("bool")->u, 1u);
  EXPECT_EQ(f.Find("str")->s, "hello");
  EXPECT_EQ(f.Find("u64")->u, uint64_t{1} << 63);
  EXPECT_EQ(f.Find("i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.Find("f64")->f, -2.25);
  EXPECT_EQ(f.Find("absent"), nullptr);
  EXPECT_TRUE(f.Has("str"));
  EXPECT_FALSE(f.Has("st"));
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufFileTest, StringsMayBeEmptyOrHoldAnyByte) {
  const std::string odd("a\0b\xff", 4);
  const std::string bytes = gt::GgufBuilder()
                                .Add("empty", gt::Str(""))
                                .Add("odd", gt::Str(odd))
                                .Add("", gt::U8(1))
                                .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->GetString("empty").value(), "");
  EXPECT_EQ((*file)->GetString("odd").value(), odd);
  EXPECT_EQ((*file)->GetUint("").value(), 1u);
  // Strings are views into the caller's bytes, not copies.
  const char* view = (*file)->Find("odd")->s.data();
  EXPECT_GE(view, bytes.data());
  EXPECT_LT(view, bytes.data() + bytes.size());
}

TEST(GgufFileTest, ParsesArraysIncludingNestedAndEmpty) {
  using gt::gguf_type::kArray;
  using gt::gguf_type::kInt32;
  using gt::gguf_type::kUint8;
  const std::string bytes =
      gt::GgufBuilder()
          .Add("strings", gt::StrArray({"a", "", "ccc"}))
          .Add("floats", gt::F32Array({0.5f, -1.0f}))
          .Add("empty", gt::Array(kUint8, {}))
          .Add("nested",
               gt::Array(kArray, {gt::I32Array({1, 2}), gt::I32Array({}),
                                  gt::Array(kInt32, {gt::I32(-3)})}))
          .Add("deep",
               gt::Array(kArray, {gt::Array(kArray, {gt::StrArray({"x"})})}))
          .Add("after", gt::U8(9))
          .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;

  EXPECT_THAT(f.GetStringArray("strings").value(), ElementsAre("a", "", "ccc"));
  EXPECT_THAT(f.GetFloatArray("floats").value(), ElementsAre(0.5f, -1.0f));
  const GgufValue* empty = f.Find("empty");
  EXPECT_EQ(empty->type, GgufValueType::kArray);
  EXPECT_EQ(empty->element_type, GgufValueType::kUint8);
  EXPECT_TRUE(empty->elements.empty());

  const GgufValue* nested = f.Find("nested");
  EXPECT_EQ(nested->element_type, GgufValueType::kArray);
  ASSERT_EQ(nested->elements.size(), 3u);
  EXPECT_EQ(nested->elements[0].element_type, GgufValueType::kInt32);
  ASSERT_EQ(nested->elements[0].elements.size(), 2u);
  EXPECT_EQ(nested->elements[0].elements[1].i, 2);
  EXPECT_TRUE(nested->elements[1].elements.empty());
  EXPECT_EQ(nested->elements[2].elements[0].i, -3);

  const GgufValue& deep = f.Find("deep")->elements[0].elements[0];
  EXPECT_EQ(deep.element_type, GgufValueType::kString);
  EXPECT_EQ(deep.elements[0].s, "x");
  // The entry after the nested arrays was read from the right offset.
  EXPECT_EQ(f.GetUint("after").value(), 9u);
}

TEST(GgufFileTest, VersionTwoAndThreeShareOneLayout) {
  for (uint32_t version : {2u, 3u}) {
    const std::string bytes =
        gt::GgufBuilder()
            .SetVersion(version)
            .Add("general.architecture", gt::Str("llama"))
            .AddF32Tensor("t", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})
            .Build();
    auto file = Parse(bytes);
    ASSERT_TRUE(file.ok()) << "version " << version << ": " << file.status();
    EXPECT_EQ((*file)->version(), version);
    EXPECT_EQ((*file)->GetString("general.architecture").value(), "llama");
    ASSERT_NE((*file)->FindTensor("t"), nullptr);
    float last;
    std::memcpy(&last, (*file)->FindTensor("t")->data + 5 * sizeof(float),
                sizeof(last));
    EXPECT_EQ(last, 6.0f);
  }
}

TEST(GgufFileTest, TensorInfosShapesSizesAndData) {
  const std::string q8(2 * 34, '\x11');  // 64 Q8_0 elements: 2 blocks
  const std::string f16(3 * 2 * 2, '\x22');
  gt::GgufLayout layout;
  const std::string bytes =
      gt::GgufBuilder()
          .AddF32Tensor("a", {4}, std::vector<float>{1, 2, 3, 4})
          .AddTensor("b.weight", GgmlType::kQ8_0, {32, 2}, q8)
          .AddTensor("c", GgmlType::kF16, {3, 2, 1, 1}, f16)
          .Build(&layout);
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;

  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), layout.data_offset);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.file_size(), bytes.size());
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[1].name, "b.weight");  // file order

  const GgufTensorInfo* b = f.FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::kQ8_0);
  EXPECT_THAT(b->shape, ElementsAre(32, 2));
  EXPECT_EQ(b->num_elements(), 64);
  EXPECT_EQ(b->size_bytes, 68u);
  EXPECT_EQ(b->offset, layout.tensor_data_offsets[1] - layout.data_offset);
  EXPECT_EQ(b->offset % 32, 0u);
  EXPECT_EQ(b->data, reinterpret_cast<const uint8_t*>(bytes.data()) +
                         layout.tensor_data_offsets[1]);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b->data), 68), q8);

  const GgufTensorInfo* c = f.FindTensor("c");
  EXPECT_THAT(c->shape, ElementsAre(3, 2, 1, 1));
  EXPECT_EQ(c->size_bytes, 12u);
  EXPECT_EQ(f.FindTensor("a")->size_bytes, 16u);
  EXPECT_EQ(f.FindTensor("d"), nullptr);
  EXPECT_EQ(f.FindTensor("b"), nullptr);
}

TEST(GgufFileTest, CustomAlignmentPlacesDataOnItsBoundaries) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    gt::GgufLayout layout;
    const std::string bytes = gt::GgufBuilder()
                                  .SetAlignment(alignment)
                                  .AddF32Tensor("x", {3})
                                  .AddF32Tensor("y", {5})
                                  .Build(&layout);
    auto file = Parse(bytes);
    ASSERT_TRUE(file.ok()) << alignment << ": " << file.status();
    EXPECT_EQ((*file)->alignment(), alignment);
    EXPECT_EQ((*file)->data_offset(), layout.data_offset);
    EXPECT_EQ((*file)->data_offset() % alignment, 0u);
    EXPECT_GE((*file)->data_offset(), layout.infos_end);
    EXPECT_LT((*file)->data_offset(), layout.infos_end + alignment);
    EXPECT_EQ((*file)->FindTensor("y")->offset % alignment, 0u);
    EXPECT_EQ((*file)->FindTensor("y")->data - (*file)->FindTensor("x")->data,
              static_cast<ptrdiff_t>(layout.tensor_data_offsets[1] -
                                     layout.tensor_data_offsets[0]));
  }
}

TEST(GgufFileTest, FileWithoutTensorsMayEndBeforeThePadding) {
  // Nothing follows the metadata: the aligned data section start is past the
  // end of the file, which is fine with no tensor data to hold.
  const std::string bytes = gt::GgufBuilder().Add("k", gt::U8(1)).Build();
  ASSERT_NE(bytes.size() % 32, 0u);
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->tensors().empty());
  EXPECT_EQ((*file)->data_offset() % 32, 0u);
}

TEST(GgufFileTest, IntegerGettersConvertWhenTheValueFits) {
  const std::string bytes = gt::GgufBuilder()
                                .Add("u8", gt::U8(7))
                                .Add("i16", gt::I16(300))
                                .Add("neg", gt::I32(-5))
                                .Add("big", gt::U64(uint64_t{1} << 63))
                                .Add("f", gt::F32(2.5f))
                                .Add("s", gt::Str("x"))
                                .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.GetUint("u8").value(), 7u);
  EXPECT_EQ(f.GetInt("u8").value(), 7);
  EXPECT_EQ(f.GetUint("i16").value(), 300u);
  EXPECT_EQ(f.GetInt("neg").value(), -5);
  EXPECT_EQ(f.GetUint("big").value(), uint64_t{1} << 63);

  absl::Status s = f.GetUint("neg").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'neg'"));
  EXPECT_THAT(s.message(), HasSubstr("int32 -5"));
  s = f.GetInt("big").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("uint64 9223372036854775808"));
  s = f.GetUint("f").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'f' is float32, want an unsigned"));
  s = f.GetInt("s").status();
  EXPECT_THAT(s.message(), HasSubstr("'s' is string, want an integer"));
}

TEST(GgufFileTest, FloatBoolAndStringGetters) {
  const std::string bytes = gt::GgufBuilder()
                                .Add("f32", gt::F32(0.25f))
                                .Add("f64", gt::F64(1e-300))
                                .Add("i", gt::I64(-4))
                                .Add("u", gt::U16(9))
                                .Add("b", gt::Bool(false))
                                .Add("s", gt::Str("text"))
                                .Add("arr", gt::StrArray({"x"}))
                                .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.GetFloat("f32").value(), 0.25);
  EXPECT_EQ(f.GetFloat("f64").value(), 1e-300);
  EXPECT_EQ(f.GetFloat("i").value(), -4.0);
  EXPECT_EQ(f.GetFloat("u").value(), 9.0);
  EXPECT_EQ(f.GetBool("b").value(), false);
  EXPECT_EQ(f.GetString("s").value(), "text");

  EXPECT_THAT(f.GetFloat("s").status().message(),
              HasSubstr("'s' is string, want a number"));
  EXPECT_THAT(f.GetBool("u").status().message(),
              HasSubstr("'u' is uint16, want bool"));
  EXPECT_THAT(f.GetString("arr").status().message(),
              HasSubstr("'arr' is array<string>, want string"));
  absl::Status missing = f.GetString("nope").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("'nope' not found"));
}

TEST(GgufFileTest, ArrayGettersConvertElements) {
  const std::string bytes =
      gt::GgufBuilder()
          .Add("ints", gt::I32Array({-1, 0, 7}))
          .Add("u64s", gt::Array(gt::gguf_type::kUint64,
                                 {gt::U64(1), gt::U64(uint64_t{1} << 63)}))
          .Add("floats", gt::F32Array({1.5f}))
          .Add("strings", gt::StrArray({"a"}))
          .Add("scalar", gt::U8(1))
          .Build();
  auto file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_THAT(f.GetIntArray("ints").value(), ElementsAre(-1, 0, 7));
  EXPECT_THAT(f.GetFloatArray("ints").value(), ElementsAre(-1.0f, 0.0f, 7.0f));

  absl::Status s = f.GetIntArray("u64s").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'u64s' element #1"));
  EXPECT_THAT(f.GetIntArray("floats").status().message(),
              HasSubstr("'floats' is array<float32>, want an array of int"));
  EXPECT_THAT(f.GetStringArray("ints").status().message(),
              HasSubstr("'ints' is array<int32>, want array<string>"));
  EXPECT_THAT(f.GetFloatArray("strings").status().message(),
              HasSubstr("want an array of numbers"));
  EXPECT_THAT(f.GetStringArray("scalar").status().message(),
              HasSubstr("'scalar' is uint8"));
  EXPECT_EQ(f.GetIntArray("none").status().code(), absl::StatusCode::kNotFound);
}

TEST(GgufFileTest, OpenMapsAFileAndNamesItInErrors) {
  const std::string good = gt::WriteFile(
      "good.gguf", gt::GgufBuilder()
                       .Add("general.name", gt::Str("tiny"))
                       .AddF32Tensor("w", {2}, std::vector<float>{3, 4})
                       .Build());
  auto file = GgufFile::Open(good);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->GetString("general.name").value(), "tiny");
  float w1;
  std::memcpy(&w1, (*file)->FindTensor("w")->data + 4, 4);
  EXPECT_EQ(w1, 4.0f);

  const std::string bad = gt::WriteFile("bad.gguf", "GGUF\x03");
  absl::Status s = GgufFile::Open(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(bad));
  EXPECT_THAT(s.message(), HasSubstr("version at offset 4"));

  const std::string missing = good + ".absent";
  s = GgufFile::Open(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(missing));

  s = GgufFile::Open(::testing::TempDir()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not a regular file"));

  s = GgufFile::Open(gt::WriteFile("empty.gguf", "")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("empty"));
}

// The tokenizer conformance files in ../shared are real llama.cpp GGUFs
// (metadata only, no tensors) with the largest arrays we have at hand.
TEST(GgufFileTest, ParsesEveryVocabFileInShared) {
  const std::filesystem::path dir =
      std::filesystem::path(::paceline::testing::SharedDir()) / "vocab";
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no vocab files at " << dir.string();
  }
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    auto file = GgufFile::Open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status();
    auto tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << entry.path() << ": " << tokens.status();
    EXPECT_GT(tokens->size(), 1000u) << entry.path();
    EXPECT_TRUE((*file)->GetString("general.architecture").ok());
    ++parsed;
  }
  EXPECT_GT(parsed, 0);
}

// The real model in ../shared: a llama2.c checkpoint converted by llama.cpp.
class Stories260KTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string& path = gt::kStories260KPath;
    if (!gt::HaveStories260K()) {
      GTEST_SKIP() << "test model not found at " << path
                   << " (set PACELINE_SHARED_DIR to the shared/ folder)";
    }
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }
  std::unique_ptr<GgufFile> file_;
};

TEST_F(Stories260KTest, HeaderAndMetadata) {
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(file_->file_size(), 1185376u);
  EXPECT_EQ(file_->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(file_->GetUint("llama.context_length").value(), 512u);
  EXPECT_EQ(file_->GetString("tokenizer.ggml.model").value(), "llama");
  auto tokens = file_->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ(file_->GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_FALSE(file_->Has("llama.rope.freq_base"));
}

TEST_F(Stories260KTest, TensorNamesAndShapes) {
  ASSERT_EQ(file_->tensors().size(), 3u + 5u * 9u);
  const auto shape = [&](const std::string& name) {
    const GgufTensorInfo* t = file_->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t != nullptr ? t->shape : std::vector<int64_t>{};
  };
  EXPECT_THAT(shape("token_embd.weight"), ElementsAre(64, 512));
  EXPECT_THAT(shape("output.weight"), ElementsAre(64, 512));
  EXPECT_THAT(shape("output_norm.weight"), ElementsAre(64));
  for (int i = 0; i < 5; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_THAT(shape(p + "attn_q.weight"), ElementsAre(64, 64));
    EXPECT_THAT(shape(p + "attn_k.weight"), ElementsAre(64, 32));
    EXPECT_THAT(shape(p + "attn_v.weight"), ElementsAre(64, 32));
    EXPECT_THAT(shape(p + "attn_output.weight"), ElementsAre(64, 64));
    EXPECT_THAT(shape(p + "attn_norm.weight"), ElementsAre(64));
    EXPECT_THAT(shape(p + "ffn_gate.weight"), ElementsAre(64, 172));
    EXPECT_THAT(shape(p + "ffn_down.weight"), ElementsAre(172, 64));
    EXPECT_THAT(shape(p + "ffn_up.weight"), ElementsAre(64, 172));
    EXPECT_THAT(shape(p + "ffn_norm.weight"), ElementsAre(64));
  }
  int64_t weights = 0;
  for (const GgufTensorInfo& t : file_->tensors()) {
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    EXPECT_EQ(t.size_bytes, static_cast<uint64_t>(t.num_elements()) * 4);
    weights += t.num_elements();
  }
  // README: 260,032 weights, plus output.weight repeating the embedding.
  EXPECT_EQ(weights, 260032 + 64 * 512);
}

TEST_F(Stories260KTest, ModelConfig) {
  auto config = ModelConfigFromGguf(*file_);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& c = *config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_EQ(c.rope_layout, RopeLayout::kAdjacentPairs);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.rope_freq_base, 10000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kNone);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
  EXPECT_FALSE(c.tied_output);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.ParameterCount(), 260032 + 64 * 512);
  EXPECT_TRUE(CheckModelTensors(*file_, c).ok());
}

}  // namespace
}  // namespace paceline::engine
