#include "engine/model/model_config.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "engine/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::engine {
namespace {

namespace gt = ::paceline::testing;
using ::testing::HasSubstr;

// A parsed file together with the bytes it views.
struct Model {
  std::string bytes;
  std::unique_ptr<GgufFile> file;
};

Model Load(const gt::GgufBuilder& builder) {
  Model m;
  m.bytes = builder.Build();
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(m.bytes.data()), m.bytes.size());
  EXPECT_TRUE(file.ok()) << file.status();
  if (file.ok()) m.file = *std::move(file);
  return m;
}

Model TinyModel(const gt::TinyModelSpec& spec) {
  gt::GgufBuilder b;
  gt::AddTinyModel(b, spec);
  return Load(b);
}

// Counted from the file, independently of ModelConfig::ParameterCount.
int64_t TensorElements(const GgufFile& file) {
  int64_t n = 0;
  for (const GgufTensorInfo& t : file.tensors()) n += t.num_elements();
  return n;
}

TEST(ModelConfigTest, LlamaDefaults) {
  // No head_count_kv, key_length, rope keys: every default applies.
  const Model m = TinyModel({.n_kv_heads = 0});
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->name, "");
  EXPECT_EQ(c->n_layers, 2);
  EXPECT_EQ(c->n_embd, 16);
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 4);
  EXPECT_EQ(c->n_ff, 24);
  EXPECT_EQ(c->n_vocab, 10);
  EXPECT_EQ(c->context_length, 64);
  EXPECT_EQ(c->rope_layout, RopeLayout::kAdjacentPairs);
  EXPECT_EQ(c->rope_dim, 4);
  EXPECT_EQ(c->rope_freq_base, 10000.0);
  EXPECT_EQ(c->rope_scaling, RopeScaling::kNone);
  EXPECT_EQ(c->rope_scaling_factor, 1.0);
  EXPECT_EQ(c->rope_original_context, 0);
  EXPECT_NEAR(c->rms_norm_eps, 1e-6, 1e-12);
  EXPECT_FALSE(c->tied_output);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(CheckModelTensors(*m.file, *c).ok());
  EXPECT_EQ(c->ParameterCount(), TensorElements(*m.file));
}

TEST(ModelConfigTest, GroupedQueryAttentionAndExplicitKeys) {
  gt::GgufBuilder b;
  gt::AddTinyModel(b, {.n_kv_heads = 2});
  b.Add("general.name", gt::Str("tiny llama"))
      .Add("llama.rope.freq_base", gt::F32(500000.0f))
      .Add("llama.rope.dimension_count", gt::U32(2));
  const Model m = Load(b);
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "tiny llama");
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->rope_freq_base, 500000.0);
  EXPECT_EQ(c->rope_dim, 2);
  EXPECT_TRUE(CheckModelTensors(*m.file, *c).ok());
  // attn_k/attn_v are n_kv_heads * head_dim = 8 wide.
  EXPECT_EQ(m.file->FindTensor("blk.0.attn_k.weight")->shape[1], 8);
  EXPECT_EQ(c->ParameterCount(), TensorElements(*m.file));
}

TEST(ModelConfigTest, Qwen2HasBiasesAndNeoxRope) {
  const Model m = TinyModel({.arch = "qwen2", .qkv_bias = true});
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeoxHalves);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(CheckModelTensors(*m.file, *c).ok());
  EXPECT_EQ(c->ParameterCount(), TensorElements(*m.file));

  // Without bias tensors the config says so rather than failing.
  const Model plain = TinyModel({.arch = "qwen2"});
  auto c2 = ModelConfigFromGguf(*plain.file);
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_FALSE(c2->qkv_bias);
}

TEST(ModelConfigTest, Qwen3KeyLengthQkNormAndTiedOutput) {
  // head_dim 8 with 4 heads: the attention is 32 wide, twice the model.
  const Model m = TinyModel(
      {.arch = "qwen3", .head_dim = 8, .tied_output = true, .qk_norm = true});
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeoxHalves);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_TRUE(c->tied_output);
  EXPECT_TRUE(CheckModelTensors(*m.file, *c).ok());
  EXPECT_EQ(m.file->FindTensor("blk.1.attn_output.weight")->shape[0], 32);
  EXPECT_EQ(c->ParameterCount(), TensorElements(*m.file));
}

TEST(ModelConfigTest, ParameterCountFormula) {
  // Checked against a hand count as well as against the files above.
  ModelConfig c;
  c.n_layers = 3;
  c.n_embd = 10;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 5;
  c.n_ff = 7;
  c.n_vocab = 11;
  // embedding 110; per layer: norms 20, q 100, k 50, v 50, o 100, ffn 210.
  const int64_t per_layer = 20 + 100 + 50 + 50 + 100 + 210;
  EXPECT_EQ(c.ParameterCount(), 110 + 3 * per_layer + 10 + 110);
  c.tied_output = true;
  EXPECT_EQ(c.ParameterCount(), 110 + 3 * per_layer + 10);
  c.qkv_bias = true;  // + 10 + 5 + 5 per layer
  c.qk_norm = true;   // + 5 + 5 per layer
  EXPECT_EQ(c.ParameterCount(), 110 + 3 * (per_layer + 30) + 10);
}

TEST(ModelConfigTest, VocabSizeSources) {
  // From the embedding when there is no token list.
  Model m = TinyModel({.n_vocab = 12, .write_tokens = false});
  EXPECT_EQ(ModelConfigFromGguf(*m.file)->n_vocab, 12);

  // <arch>.vocab_size wins over the token list.
  gt::GgufBuilder b;
  gt::AddTinyModel(b, {.n_vocab = 10});
  b.Add("llama.vocab_size", gt::U32(10));
  m = Load(b);
  EXPECT_EQ(ModelConfigFromGguf(*m.file)->n_vocab, 10);
}

TEST(ModelConfigTest, RopeScaling) {
  gt::GgufBuilder linear;
  linear.Add("llama.rope.scaling.type", gt::Str("linear"))
      .Add("llama.rope.scaling.factor", gt::F32(4.0f));
  gt::AddTinyModel(linear, {});
  Model m = Load(linear);
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c->rope_scaling_factor, 4.0);

  gt::GgufBuilder old;  // the pre-rope.scaling key
  old.Add("llama.rope.scale_linear", gt::F32(2.0f));
  gt::AddTinyModel(old, {});
  m = Load(old);
  c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c->rope_scaling_factor, 2.0);

  gt::GgufBuilder yarn;
  yarn.Add("qwen2.rope.scaling.type", gt::Str("yarn"))
      .Add("qwen2.rope.scaling.factor", gt::F32(4.0f))
      .Add("qwen2.rope.scaling.original_context_length", gt::U32(32));
  gt::AddTinyModel(yarn, {.arch = "qwen2"});
  m = Load(yarn);
  c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c->rope_scaling_factor, 4.0);
  EXPECT_EQ(c->rope_original_context, 32);

  gt::GgufBuilder none;  // "none" ignores a factor
  none.Add("llama.rope.scaling.type", gt::Str("none"))
      .Add("llama.rope.scaling.factor", gt::F32(8.0f));
  gt::AddTinyModel(none, {});
  m = Load(none);
  c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kNone);
  EXPECT_EQ(c->rope_scaling_factor, 1.0);

  gt::GgufBuilder bad;
  bad.Add("llama.rope.scaling.type", gt::Str("longrope"));
  gt::AddTinyModel(bad, {});
  m = Load(bad);
  const absl::Status s = ModelConfigFromGguf(*m.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unsupported rope scaling type "
                                     "'longrope'"));
  EXPECT_THAT(s.message(), HasSubstr("llama.rope.scaling.type"));
}

TEST(ModelConfigTest, YarnKeysAndTheirDefaults) {
  gt::GgufBuilder plain;  // published defaults; context length as original
  plain.Add("qwen2.rope.scaling.type", gt::Str("yarn"))
      .Add("qwen2.rope.scaling.factor", gt::F32(4.0f));
  gt::AddTinyModel(plain, {.arch = "qwen2"});
  Model m = Load(plain);
  auto c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_original_context, 64);
  EXPECT_EQ(c->yarn_ext_factor, 1.0);
  EXPECT_EQ(c->yarn_attn_factor, 0.0);  // derived: 0.1 ln(factor) + 1
  EXPECT_EQ(c->yarn_beta_fast, 32.0);
  EXPECT_EQ(c->yarn_beta_slow, 1.0);
  EXPECT_EQ(c->rope_attn_factor, 1.0);

  gt::GgufBuilder all;
  all.Add("qwen2.rope.scaling.type", gt::Str("yarn"))
      .Add("qwen2.rope.scaling.factor", gt::F32(8.0f))
      .Add("qwen2.rope.scaling.original_context_length", gt::U32(32))
      .Add("qwen2.rope.scaling.yarn_ext_factor", gt::F32(0.5f))
      .Add("qwen2.rope.scaling.yarn_attn_factor", gt::F32(1.25f))
      .Add("qwen2.rope.scaling.yarn_beta_fast", gt::F32(16.0f))
      .Add("qwen2.rope.scaling.yarn_beta_slow", gt::F32(2.0f))
      .Add("qwen2.rope.scaling.attn_factor", gt::F32(0.5f));
  gt::AddTinyModel(all, {.arch = "qwen2"});
  m = Load(all);
  c = ModelConfigFromGguf(*m.file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_original_context, 32);
  EXPECT_EQ(c->yarn_ext_factor, 0.5);
  EXPECT_EQ(c->yarn_attn_factor, 1.25);
  EXPECT_EQ(c->yarn_beta_fast, 16.0);
  EXPECT_EQ(c->yarn_beta_slow, 2.0);
  EXPECT_EQ(c->rope_attn_factor, 0.5);

  gt::GgufBuilder bad;
  bad.Add("llama.rope.scaling.type", gt::Str("yarn"))
      .Add("llama.rope.scaling.yarn_beta_slow", gt::F32(64.0f));
  gt::AddTinyModel(bad, {});
  m = Load(bad);
  const absl::Status s = ModelConfigFromGguf(*m.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("llama.rope.scaling.yarn_beta_slow"));
}

// A model whose metadata is changed by `edit` after the usual keys.
absl::Status ConfigError(const gt::TinyModelSpec& spec,
                         void (*edit)(gt::GgufBuilder&)) {
  gt::GgufBuilder b;
  gt::AddTinyModel(b, spec);
  edit(b);
  const Model m = Load(b);
  if (m.file == nullptr) return absl::InternalError("test file did not parse");
  return ModelConfigFromGguf(*m.file).status();
}

TEST(ModelConfigTest, HyperParameterErrorsNameTheKey) {
  absl::Status s = ConfigError({}, [](gt::GgufBuilder&) {});
  EXPECT_TRUE(s.ok()) << s;

  Model bare =
      Load(gt::GgufBuilder().Add("general.architecture", gt::Str("llama")));
  s = ModelConfigFromGguf(*bare.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'llama.block_count' not found"));

  Model no_arch = Load(gt::GgufBuilder().Add("x", gt::U8(1)));
  s = ModelConfigFromGguf(*no_arch.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("general.architecture"));

  // 4 heads do not divide 18 and there is no key_length to say otherwise.
  s = ConfigError({.n_embd = 18, .n_kv_heads = 0}, [](gt::GgufBuilder&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'llama.attention.head_count' is 4, "
                                     "which does not divide the embedding "
                                     "length 18"));

  s = ConfigError({.n_kv_heads = 3}, [](gt::GgufBuilder&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'llama.attention.head_count_kv' is 3, "
                                     "which does not divide"));

  Model no_heads = Load(gt::GgufBuilder()
                            .Add("general.architecture", gt::Str("llama"))
                            .Add("llama.block_count", gt::U32(1))
                            .Add("llama.embedding_length", gt::U32(8))
                            .Add("llama.feed_forward_length", gt::U32(8))
                            .Add("llama.context_length", gt::U32(8))
                            .Add("llama.vocab_size", gt::U32(8))
                            .Add("llama.attention.head_count", gt::U32(0)));
  s = ModelConfigFromGguf(*no_heads.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("'llama.attention.head_count' is 0; want 1 to"));

  s = ConfigError({.arch = "qwen3"}, [](gt::GgufBuilder& b) {
    b.Add("qwen3.rope.dimension_count", gt::U32(5));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'qwen3.rope.dimension_count' is 5; "
                                     "want 1 to 4"));

  s = ConfigError({}, [](gt::GgufBuilder& b) {
    b.Add("llama.rope.freq_base", gt::F32(-1.0f));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'llama.rope.freq_base' is -1"));

  s = ConfigError({}, [](gt::GgufBuilder& b) {
    b.Add("llama.attention.value_length", gt::U32(2));
  });
  EXPECT_THAT(s.message(), HasSubstr("'llama.attention.value_length' is 2"));
}

TEST(ModelConfigTest, WrongTypeForAKeyIsAnError) {
  gt::GgufBuilder b;
  b.Add("general.architecture", gt::Str("llama"))
      .Add("llama.block_count", gt::Str("two"));
  const Model m = Load(b);
  const absl::Status s = ModelConfigFromGguf(*m.file).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'llama.block_count' is string"));
}

TEST(ModelConfigTest, CheckModelTensorsReportsMissingAndMisshapen) {
  const Model m = TinyModel({.arch = "qwen3", .qk_norm = true});
  ModelConfig c = ModelConfigFromGguf(*m.file).value();
  ASSERT_TRUE(CheckModelTensors(*m.file, c).ok());

  // The config asks for something the file does not have.
  ModelConfig biased = c;
  biased.qkv_bias = true;
  absl::Status s = CheckModelTensors(*m.file, biased);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.attn_q.bias' is missing"));

  const Model tied = TinyModel({.tied_output = true});
  ModelConfig untied = ModelConfigFromGguf(*tied.file).value();
  untied.tied_output = false;
  s = CheckModelTensors(*tied.file, untied);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'output.weight' is missing"));

  // Shapes: a config wider than the file.
  ModelConfig wide = c;
  wide.n_ff = 25;
  s = CheckModelTensors(*m.file, wide);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.ffn_gate.weight' has "
                                     "shape [16, 24], want [16, 25]"));

  ModelConfig more_kv = c;
  more_kv.n_kv_heads = 4;
  s = CheckModelTensors(*m.file, more_kv);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.attn_k.weight' has "
                                     "shape [16, 8], want [16, 16]"));

  ModelConfig bigger_vocab = c;
  bigger_vocab.n_vocab = 11;
  s = CheckModelTensors(*m.file, bigger_vocab);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'token_embd.weight' has shape "
                                     "[16, 10], want [16, 11]"));

  ModelConfig more_layers = c;
  more_layers.n_layers = 3;
  s = CheckModelTensors(*m.file, more_layers);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'blk.2.attn_norm.weight' is missing"));
}

}  // namespace
}  // namespace paceline::engine
