// Embeddings on the CUDA engine: its hidden rows (SequenceSlice::num_hidden)
// pooled by EmbeddingPooler against llama.cpp's embeddings of the oracle
// qwen3 F32 file, last and mean pooling (tests/engine/embedding_reference.h,
// as the CPU engine's test compares them), through Forward and through
// ForwardAndSample.

#include <memory>
#include <vector>

#include "engine/cuda/cuda_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"
#include "tests/engine/embedding_reference.h"

namespace paceline::engine::cuda {
namespace {

class CudaEmbeddingTest : public testing::GpuTest {
 protected:
  std::unique_ptr<CudaEngine> Engine() {
    absl::StatusOr<LoadedModel> model =
        OpenModel(engine::testing::EmbeddingModelPath());
    if (!model.ok()) return nullptr;
    CudaEngineOptions options;
    options.num_blocks = 16;
    options.max_tokens_per_step = 64;
    auto engine = CudaEngine::Create(model->weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }
};

TEST_F(CudaEmbeddingTest, PooledEmbeddingsAgreeWithLlamaCpp) {
  std::unique_ptr<CudaEngine> engine = Engine();
  if (engine == nullptr) GTEST_SKIP() << "no oracle qwen3 file";
  ASSERT_TRUE(engine->returns_hidden());
  engine::testing::ExpectEmbeddingsMatchLlamaCpp(*engine,
                                                 engine->block_size(), 1e-4);
}

// ForwardAndSample writes the hidden rows too, beside a sampled row.
TEST_F(CudaEmbeddingTest, ForwardAndSampleWritesTheSameHiddenRows) {
  std::unique_ptr<CudaEngine> engine = Engine();
  if (engine == nullptr) GTEST_SKIP() << "no oracle qwen3 file";
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  const std::vector<int32_t> table = {0};
  ForwardBatch batch;
  batch.tokens = prompt;
  SequenceSlice slice;
  slice.token_count = static_cast<int32_t>(prompt.size());
  slice.block_table = table;
  slice.num_hidden = 2;
  slice.num_logits = 1;
  batch.sequences.push_back(slice);
  const int64_t width = engine->config().n_embd;
  std::vector<float> plain(2 * width), sampled(2 * width);
  std::vector<float> logits(engine->config().n_vocab);
  batch.hidden = absl::MakeSpan(plain);
  ASSERT_TRUE(engine->Forward(batch, absl::MakeSpan(logits)).ok());
  batch.hidden = absl::MakeSpan(sampled);
  RowSampling row;
  row.in_engine = true;
  int32_t token = -1;
  ASSERT_TRUE(engine
                  ->ForwardAndSample(batch, {row}, absl::MakeSpan(&token, 1),
                                     absl::MakeSpan(logits), nullptr)
                  .ok());
  EXPECT_GE(token, 0);
  EXPECT_EQ(plain, sampled);
  double norm = 0;
  for (float v : plain) norm += double{v} * v;
  EXPECT_GT(norm, 0);
}

}  // namespace
}  // namespace paceline::engine::cuda
