// Embeddings on the CPU engine: hidden rows (SequenceSlice::num_hidden)
// pooled by EmbeddingPooler against llama.cpp's
// (tests/engine/embedding_reference.h); the pooling_type key; the batch
// checks.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/embedding_pooler.h"
#include "engine/engine.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/engine/embedding_reference.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_edit.h"

namespace paceline::engine {
namespace {

using cpu::CpuEngine;
using cpu::CpuEngineOptions;

using testing::EmbeddingModelPath;
using testing::EmbeddingReference;

std::string ModelPath() { return EmbeddingModelPath(); }

std::vector<float> Embed(CpuEngine& engine, PoolingType pooling,
                         const std::vector<int32_t>& prompt, int32_t chunk) {
  return testing::Embed(engine, engine.block_size(), pooling, prompt, chunk);
}

TEST(EmbeddingTest, PooledEmbeddingsAgreeWithLlamaCpp) {
  absl::StatusOr<LoadedModel> model = OpenModel(ModelPath());
  if (!model.ok()) GTEST_SKIP() << model.status();
  CpuEngineOptions options;
  options.num_blocks = 16;
  options.max_tokens_per_step = 64;
  options.num_threads = 2;
  absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
      CpuEngine::Create(model->weights, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  testing::ExpectEmbeddingsMatchLlamaCpp(**engine, (*engine)->block_size(),
                                         1e-4);
}

TEST(EmbeddingTest, ChunkingDoesNotChangeThePooledVector) {
  absl::StatusOr<LoadedModel> model = OpenModel(ModelPath());
  if (!model.ok()) GTEST_SKIP() << model.status();
  CpuEngineOptions options;
  options.num_blocks = 16;
  options.max_tokens_per_step = 128;
  options.num_threads = 2;
  options.kv_type = GgmlType::kF32;
  absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
      CpuEngine::Create(model->weights, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto prompt = EmbeddingReference()["prompts"][1].get<std::vector<int32_t>>();
  for (PoolingType pooling :
       {PoolingType::kMean, PoolingType::kCls, PoolingType::kLast}) {
    const std::vector<float> whole = Embed(**engine, pooling, prompt, 128);
    const std::vector<float> chunked = Embed(**engine, pooling, prompt, 7);
    double norm = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_NEAR(whole[i], chunked[i], 1e-5) << PoolingTypeName(pooling);
      norm += double{whole[i]} * whole[i];
    }
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
}

TEST(EmbeddingTest, PoolingTypeIsReadFromTheFile) {
  const std::string file = ::paceline::testing::ReadFile(ModelPath());
  if (file.empty()) GTEST_SKIP() << "no " << ModelPath();
  const std::string* bytes = &file;
  const auto config_of = [](const std::string& gguf) {
    auto file = GgufFile::FromBuffer(
        reinterpret_cast<const uint8_t*>(gguf.data()), gguf.size());
    EXPECT_TRUE(file.ok()) << file.status();
    return ModelConfigFromGguf(**file);
  };
  absl::StatusOr<ModelConfig> plain = config_of(*bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->pooling, PoolingType::kNone);
  for (uint32_t v : {0u, 1u, 2u, 3u}) {
    absl::StatusOr<std::string> edited =
        ::paceline::testing::AddUint32Metadata(*bytes, "qwen3.pooling_type", v);
    ASSERT_TRUE(edited.ok()) << edited.status();
    absl::StatusOr<ModelConfig> c = config_of(*edited);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(static_cast<uint32_t>(c->pooling), v);
  }
  absl::StatusOr<std::string> rank =
      ::paceline::testing::AddUint32Metadata(*bytes, "qwen3.pooling_type", 4);
  ASSERT_TRUE(rank.ok()) << rank.status();
  absl::StatusOr<ModelConfig> c = config_of(*rank);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("qwen3.pooling_type"), std::string::npos)
      << c.status();
}

TEST(EmbeddingTest, HiddenRowsAreCheckedAgainstTheBatch) {
  ForwardBatch batch;
  batch.tokens = {1, 2, 3};
  const std::vector<int32_t> table = {0};
  SequenceSlice slice;
  slice.token_count = 3;
  slice.block_table = table;
  slice.num_hidden = 2;
  batch.sequences.push_back(slice);
  BatchLimits limits;
  limits.n_vocab = 10;
  limits.block_size = 16;
  limits.num_blocks = 1;
  limits.max_tokens_per_step = 8;
  std::vector<int32_t> owner(3);
  std::vector<float> hidden(2 * 4);
  batch.hidden = absl::MakeSpan(hidden);
  // A backend without hidden rows refuses them.
  EXPECT_FALSE(CheckForwardBatch(batch, 0, limits, absl::MakeSpan(owner)).ok());
  limits.hidden_width = 4;
  EXPECT_TRUE(CheckForwardBatch(batch, 0, limits, absl::MakeSpan(owner)).ok());
  batch.hidden = batch.hidden.subspan(1);
  EXPECT_FALSE(CheckForwardBatch(batch, 0, limits, absl::MakeSpan(owner)).ok());
  batch.hidden = absl::MakeSpan(hidden);
  batch.sequences[0].num_hidden = 4;
  EXPECT_FALSE(CheckForwardBatch(batch, 0, limits, absl::MakeSpan(owner)).ok());
}

}  // namespace
}  // namespace paceline::engine
