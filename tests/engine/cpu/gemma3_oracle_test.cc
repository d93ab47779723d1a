// Gemma 3 (arch/gemma3.cc) on the CPU engine against llama.cpp's logits
// (../shared/oracle-next: 4 layers, sliding window 32 on layers 0, 1 and 3
// with RoPE base 1e4, global attention with base 1e6 and linear scaling x8
// on layer 2, Q/K norms, pre- and post-norms, GeGLU, the embedding x 16,
// a tied head), by the comparison of every oracle test
// (tests/testing/oracle_logits.h): float within 0.01 of the logit std
// (llama.cpp's F16 GELU table and cache), the same argmax wherever
// llama.cpp's top two differ by more than 0.05. The prompts run to 1,200
// tokens, so the 32-position windows slide past many blocks. With the F16
// cache, as the references were made. Measured (2026-12-07): F32 0.0023.
// Not yet asserted: the quantized files, over the 0.08 of quantized files
// (Q8_0 0.080 with 4 argmax flips, Q4_K_M 0.128 with 1), within it on the
// 8-token prompt (0.056, 0.055) and growing with the prompt's length
// (0.067 and 0.098 at 100 tokens): the open question of issue 37.

#include <filesystem>
#include <iostream>
#include <string>

#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

class Gemma3OracleTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Gemma3OracleTest, AgreesWithLlamaCpp) {
  const std::string name = GetParam();
  const std::filesystem::path dir = ::paceline::testing::OracleNextDir();
  const std::filesystem::path file = dir / "models" / (name + ".gguf");
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  absl::StatusOr<LoadedModel> model = OpenModel(file.string());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->weights->config();
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_FALSE(c.IsSlidingLayer(2));
  EXPECT_TRUE(c.IsSlidingLayer(3));
  cpu::CpuEngineOptions options;
  options.num_blocks = 128;
  options.max_tokens_per_step = 128;
  options.num_threads = 2;
  options.kv_type = GgmlType::kF16;
  absl::StatusOr<std::unique_ptr<cpu::CpuEngine>> engine =
      cpu::CpuEngine::Create(model->weights, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ::paceline::testing::OracleRunOptions run;
  run.ref_dir = dir / "ref";
  ::paceline::testing::OracleMeasure m;
  const absl::Status s =
      ::paceline::testing::MeasureOracleFile(**engine, name, run, &m);
  ASSERT_TRUE(s.ok()) << s;
  std::cout << name << ": max rel. diff " << m.max_rel << " over "
            << m.positions << " positions, argmax " << m.argmax_equal << "/"
            << m.argmax_checked << "\n";
  EXPECT_GT(m.positions, 0);
  EXPECT_LE(m.max_rel, ::paceline::testing::OracleTolerance(name));
  EXPECT_EQ(m.argmax_equal, m.argmax_checked);
}

INSTANTIATE_TEST_SUITE_P(Files, Gemma3OracleTest,
                         ::testing::Values("gemma3-base-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace paceline::engine
