// The CUDA engine against the CPU engine on the RoPE-scaled oracle files
// (../shared/oracle: YaRN on qwen2, Llama 3 frequency factors on llama):
// both read one RopeTable, so every logit row of a chunked prefill and the
// greedy steps after it agree within float tolerance. (The CPU engine is
// checked against llama.cpp's logits on the same files in
// oracle_logits_test.)

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/engine_test_util.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/testing/build_paths.h"

namespace paceline::engine::cuda {
namespace {

using ::paceline::engine::testing::ContiguousBlocks;
using ::paceline::engine::testing::GenerateAlone;

class CudaRopeScalingTest : public testing::GpuTest,
                            public ::testing::WithParamInterface<const char*> {
};

TEST_P(CudaRopeScalingTest, MatchesCpuOverPrefillAndDecode) {
  const std::filesystem::path path =
      std::filesystem::path(::paceline::testing::SharedDir()) / "oracle" /
      "models" / (std::string(GetParam()) + ".gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto model = OpenModel(path.string());
  ASSERT_TRUE(model.ok()) << model.status();
  CudaEngineOptions options;
  options.num_blocks = 16;
  options.max_tokens_per_step = 64;
  auto gpu = CudaEngine::Create(model->weights, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  cpu::CpuEngineOptions cpu_options;
  cpu_options.kv_type = GgmlType::kF32;  // the reference's cache
  cpu_options.num_blocks = 16;
  cpu_options.num_threads = 2;
  auto cpu_engine = cpu::CpuEngine::Create(model->weights, cpu_options);
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();

  std::vector<int32_t> prompt = {1};  // BOS, then arbitrary ids
  for (int32_t i = 1; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
  constexpr int64_t kGenerate = 6, kChunk = 16;
  const int64_t positions = static_cast<int64_t>(prompt.size()) + kGenerate;
  auto want = GenerateAlone(**cpu_engine, prompt, kGenerate, kChunk,
                            ContiguousBlocks(**cpu_engine, positions));
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = GenerateAlone(**gpu, prompt, kGenerate, kChunk,
                           ContiguousBlocks(**gpu, positions, 5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tokens, want->tokens);
  for (size_t i = 0; i < got->logits.size(); ++i) {
    testing::ExpectClose(got->logits[i], want->logits[i], 1e-4, 1e-4, "logits");
  }
}

INSTANTIATE_TEST_SUITE_P(Files, CudaRopeScalingTest,
                         ::testing::Values("qwen2-yarn-f32",
                                           "llama-llama3rope-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace paceline::engine::cuda
