// The architectures of issue 37 on the CPU engine against llama.cpp's
// logits (../shared/oracle-next, README there), by the comparison of every
// oracle test (tests/testing/oracle_logits.h): float files within 0.01 of
// the logit std (llama.cpp's F16 GELU table and cache), quantized within
// 0.08, the same argmax wherever llama.cpp's top two differ by more than
// 0.05. The prompts run to 1,200 tokens, so the 32-position windows slide
// past many blocks. With the F16 cache, as the references were made.
//
// Gemma 3 (arch/gemma3.cc): 4 layers, sliding window 32 on layers 0, 1
// and 3 with RoPE base 1e4, global attention with base 1e6 and linear
// scaling x8 on layer 2, Q/K norms, pre- and post-norms, GeGLU, the
// embedding x 16, a tied head. Its quantized files get a wider allowance:
// llama.cpp itself, changing only its build or kernels (n_ubatch 1, no
// weight repacking, no llamafile GEMM, AVX512-FP16 on) moves them by up to
// 0.107 (Q8_0) and 0.170 (Q4_K_M) of the logit std and flips argmaxes
// whose top-two margin is up to 0.118 and 0.263, against 0.036 / 0.057 on
// llama-base's files (bench/llama_cpp_self_variation.md, 2026-12-07): the
// random post_ffw_norm weights ~10 amplify every rounding difference
// before an int8 activation quantization. A tolerance of 0.08 is below
// what llama.cpp reproduces of itself there.
//
// gpt-oss (arch/gpt_oss.cc): 2 layers, layer 0 sliding (window 32), layer
// 1 full, attention sinks, Q/K/V/O biases, YaRN x32, 8 experts (4 used)
// with a biased router and biased experts, SwiGLU-OAI whose clamps bite;
// the MXFP4 file's experts kept in MXFP4.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/engine_test_util.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

std::filesystem::path ModelFile(const std::string& name) {
  return ::paceline::testing::OracleNextDir() / "models" / (name + ".gguf");
}

// Runs `name` through a CPU engine with the references' F16 cache.
void Measure(const LoadedModel& model, const std::string& name,
             ::paceline::testing::OracleMeasure* m) {
  cpu::CpuEngineOptions options;
  options.num_blocks = 128;
  options.max_tokens_per_step = 128;
  options.num_threads = 2;
  options.kv_type = GgmlType::kF16;
  absl::StatusOr<std::unique_ptr<cpu::CpuEngine>> engine =
      cpu::CpuEngine::Create(model.weights, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::paceline::testing::OracleRunOptions run;
  run.ref_dir = ::paceline::testing::OracleNextDir() / "ref";
  const absl::Status s =
      ::paceline::testing::MeasureOracleFile(**engine, name, run, m);
  ASSERT_TRUE(s.ok()) << s;
  std::cout << name << ": max rel. diff " << m->max_rel << " over "
            << m->positions << " positions, argmax " << m->argmax_equal << "/"
            << m->argmax_checked;
  for (size_t i = 0; i < m->flip_margins.size(); ++i) {
    std::cout << (i == 0 ? " (flips at margins " : ", ") << m->flip_margins[i];
  }
  std::cout << (m->flip_margins.empty() ? "\n" : ")\n");
}

// How far a file may be from llama.cpp's logits: the relative difference,
// and the largest top-two margin of llama.cpp's at which our argmax may
// differ (0.05: the oracle's rule, where no checked position may flip).
struct Allowance {
  double tolerance;
  double flip_margin;
};

Allowance AllowanceFor(const std::string& name) {
  // llama.cpp's own spread on these files (see the top of this file),
  // rounded up.
  if (name == "gemma3-base-q8_0") return {0.11, 0.12};
  if (name == "gemma3-base-q4_k_m") return {0.17, 0.27};
  // llama.cpp's logits on this file are 0.131 of the logit std from the
  // exact math on its dequantized weights and disagree with its argmax at
  // top-two margins 0.070 and 0.215 (8- and 100-token prompts with their
  // greedy rows: oracle-next's float64 numpy reference, tools/
  // np_reference.py, measured 2026-12-07, and this engine on the weights
  // widened to F32 give the same figures; cuda_oracle_test checks the
  // latter): the 8-bit activation rounding, carried by the recurrence. A
  // flip below that margin is within llama.cpp's own rounding here. (This
  // engine's 16-lane recurrence flips one at 0.077; ggml's summation order
  // none.)
  if (name == "qwen35-base-q4_k_m") return {0.08, 0.22};
  return {::paceline::testing::OracleTolerance(name), 0.05};
}

class OracleNextTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OracleNextTest, AgreesWithLlamaCpp) {
  const std::string name = GetParam();
  const std::filesystem::path file = ModelFile(name);
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  absl::StatusOr<LoadedModel> model = OpenModel(file.string());
  ASSERT_TRUE(model.ok()) << model.status();
  ::paceline::testing::OracleMeasure m;
  ASSERT_NO_FATAL_FAILURE(Measure(*model, name, &m));
  const Allowance allowed = AllowanceFor(name);
  EXPECT_GT(m.positions, 0);
  EXPECT_GT(m.argmax_checked, m.positions / 2);
  EXPECT_LE(m.max_rel, allowed.tolerance);
  for (const double margin : m.flip_margins) {
    EXPECT_LE(margin, allowed.flip_margin) << "an argmax flip";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, OracleNextTest,
    ::testing::Values("gemma3-base-f32", "gemma3-base-q8_0",
                      "gemma3-base-q4_k_m", "gpt-oss-base-f32",
                      "gpt-oss-base-q8_0", "gpt-oss-base-q4_k_m",
                      "gpt-oss-base-mxfp4", "qwen35-base-f32",
                      "qwen35-base-q8_0", "qwen35-base-q4_k_m",
                      "qwen35moe-base-q8_0", "qwen35moe-base-q4_k_m",
                      "qwen3next-base-f32", "qwen3next-base-q8_0",
                      "qwen3next-base-q4_k_m"),
    [](const auto& info) {
      std::string n = info.param;
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

TEST(OracleNextConfigTest, Gemma3SlidesOnTwoOfEveryThreeLayers) {
  const std::filesystem::path file = ModelFile("gemma3-base-f32");
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  absl::StatusOr<LoadedModel> model = OpenModel(file.string());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->weights->config();
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_FALSE(c.IsSlidingLayer(2));
  EXPECT_TRUE(c.IsSlidingLayer(3));
}

// The MXFP4 experts stay MXFP4: resident expert bytes are the file's
// (17 bytes per 32 weights), not a widened copy.
TEST(OracleNextConfigTest, GptOssKeepsMxfp4Experts) {
  const std::filesystem::path file = ModelFile("gpt-oss-base-mxfp4");
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  absl::StatusOr<LoadedModel> model = OpenModel(file.string());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->weights->config();
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_TRUE(c.IsSlidingLayer(0));
  EXPECT_FALSE(c.IsSlidingLayer(1));
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 4);
  const LayerWeights& l = model->weights->layers()[0];
  ASSERT_EQ(l.experts.size(), 8u);
  EXPECT_EQ(l.experts[0].gate.type, GgmlType::kMXFP4);
  EXPECT_EQ(l.experts[0].down.type, GgmlType::kMXFP4);
  // gate, up: 128 rows of 256; down: 256 rows of 128; 17 bytes per 32.
  const uint64_t expert = (2 * 128 * 256 + 256 * 128) / 32 * 17;
  EXPECT_EQ(model->weights->ExpertBytes(0), expert);
}

// A Gemma 3 file laid out as Google's QAT releases are: every matrix Q4_0,
// norms F16 (`matrix_type`, `norm_type`), built from the oracle F32 file's
// metadata and values. With `dequantized`, the matrices hold the Q4_0
// values again as F32 (the same weights, read by the float kernels).
std::string QatStyleGemma3(const GgufFile& f32, bool dequantized) {
  ::paceline::testing::GgufBuilder b;
  for (const auto& [key, value] : f32.metadata()) {
    if (key != "general.alignment") {
      b.Add(key, ::paceline::testing::Encode(value));
    }
  }
  for (const GgufTensorInfo& t : f32.tensors()) {
    const auto* src = reinterpret_cast<const float*>(t.data);
    const int64_t cols = t.shape[0];
    const int64_t rows = t.num_elements() / cols;
    std::vector<uint64_t> dims(t.shape.begin(), t.shape.end());
    std::string data;
    GgmlType type = GgmlType::kF16;
    if (t.shape.size() == 1) {  // a norm: F16
      data.resize(2 * cols);
      EXPECT_TRUE(QuantizeRow(type, src, cols, data.data()).ok());
    } else {
      type = GgmlType::kQ4_0;
      const size_t row_bytes = cols / 32 * 18;
      data.resize(rows * row_bytes);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_TRUE(
            QuantizeRow(type, src + r * cols, cols, data.data() + r * row_bytes)
                .ok());
      }
      if (dequantized) {
        std::string f32_data(rows * cols * sizeof(float), '\0');
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_TRUE(DequantizeRow(
                          type, data.data() + r * row_bytes,
                          reinterpret_cast<float*>(f32_data.data()) + r * cols,
                          cols)
                          .ok());
        }
        type = GgmlType::kF32;
        data = std::move(f32_data);
      }
    }
    b.AddTensor(t.name, type, dims, data);
  }
  return b.Build();
}

// Gemma 3 QAT files (Q4_0 matrices, F16 norms) load as they are and run.
TEST(OracleNextQatTest, Gemma3Q4_0WithF16NormsRunsAsItIs) {
  const std::filesystem::path file = ModelFile("gemma3-base-f32");
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  absl::StatusOr<std::unique_ptr<GgufFile>> f32 = GgufFile::Open(file.string());
  ASSERT_TRUE(f32.ok()) << f32.status();
  const std::string qat_path = ::paceline::testing::WriteFile(
      "qat.gguf", QatStyleGemma3(**f32, /*dequantized=*/false));
  const std::string twin_path = ::paceline::testing::WriteFile(
      "twin.gguf", QatStyleGemma3(**f32, /*dequantized=*/true));
  absl::StatusOr<LoadedModel> qat = OpenModel(qat_path);
  ASSERT_TRUE(qat.ok()) << qat.status();
  absl::StatusOr<LoadedModel> twin = OpenModel(twin_path);
  ASSERT_TRUE(twin.ok()) << twin.status();
  // Mapped now: the 17 MB of files need not outlive the test.
  std::filesystem::remove(qat_path);
  std::filesystem::remove(twin_path);
  // Nothing converted: the engine reads the file's Q4_0 blocks.
  const ModelWeights& w = *qat->weights;
  EXPECT_EQ(w.token_embd().type, GgmlType::kQ4_0);
  for (const LayerWeights& l : w.layers()) {
    for (const WeightView* v : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output,
                                &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      EXPECT_EQ(v->type, GgmlType::kQ4_0);
    }
  }
  // The F16 norms, as F16 holds them.
  const float* norm = reinterpret_cast<const float*>(
      (*f32)->FindTensor("blk.0.post_ffw_norm.weight")->data);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(w.layers()[0].post_ffn_norm[i],
              HalfToFloat(FloatToHalf(norm[i])));
  }
  // Same logits as the float kernels give on the same weights, up to the
  // int8 rounding of the Q4_0 kernels' activations.
  std::vector<float> logits[2];
  for (int k = 0; k < 2; ++k) {
    cpu::CpuEngineOptions options;
    options.num_blocks = 16;
    options.kv_type = GgmlType::kF32;
    auto engine =
        cpu::CpuEngine::Create((k == 0 ? qat : twin)->weights, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 420, 297, 29};
    auto r = testing::GenerateAlone(**engine, prompt, 4, 0,
                                    testing::ContiguousBlocks(**engine, 16));
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& row : r->logits) {
      logits[k].insert(logits[k].end(), row.begin(), row.end());
    }
  }
  double worst = 0, sum2 = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    ASSERT_TRUE(std::isfinite(logits[0][i]));
    worst = std::max(worst, std::abs(double{logits[0][i]} - logits[1][i]));
    sum2 += double{logits[1][i]} * logits[1][i];
  }
  const double rms = std::sqrt(sum2 / logits[1].size());
  std::cout << "QAT-style Q4_0 vs its float twin: max |diff| " << worst
            << ", logit rms " << rms << "\n";
  // Int8 activation rounding alone moves llama.cpp's own logits on these
  // Gemma 3 weights by up to 0.17 of their spread (see the top): the same
  // allowance. Measured (2026-12-07): 0.40 of an rms of 3.03 (0.13).
  EXPECT_LE(worst, 0.17 * rms);
}

}  // namespace
}  // namespace paceline::engine
