#include "tests/engine/embedding_reference.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <utility>

#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::engine::testing {

std::string EmbeddingModelPath() {
  return ::paceline::testing::SharedPath("oracle/models/qwen3-base-f32.gguf");
}

nlohmann::json EmbeddingReference() {
  std::ifstream in(::paceline::testing::SourcePath(
      "tests/engine/cpu/data/embedding_reference.json"));
  return nlohmann::json::parse(in);
}

std::vector<float> Embed(Engine& engine, int32_t block_size,
                         PoolingType pooling,
                         const std::vector<int32_t>& prompt, int32_t chunk) {
  const int64_t width = engine.config().n_embd;
  const int32_t n = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> table((n + block_size - 1) / block_size);
  std::iota(table.begin(), table.end(), 0);
  EmbeddingPooler pooler(pooling, width);
  for (int32_t begin = 0; begin < n; begin += chunk) {
    ForwardBatch batch;
    SequenceSlice slice;
    slice.token_count = std::min(chunk, n - begin);
    slice.position_begin = begin;
    slice.block_table = table;
    slice.num_hidden =
        EmbeddingPooler::RowsNeeded(pooling, begin, slice.token_count, n);
    batch.tokens.assign(prompt.begin() + begin,
                        prompt.begin() + begin + slice.token_count);
    batch.sequences.push_back(slice);
    std::vector<float> hidden(slice.num_hidden * width);
    batch.hidden = absl::MakeSpan(hidden);
    const absl::Status s = engine.Forward(batch, {});
    EXPECT_TRUE(s.ok()) << s;
    pooler.Add(begin + slice.token_count - 1, hidden);
  }
  return pooler.Finish();
}

void ExpectEmbeddingsMatchLlamaCpp(Engine& engine, int32_t block_size,
                                   double max_diff, int32_t chunk,
                                   size_t max_prompt_tokens) {
  int compared = 0;
  const nlohmann::json ref = EmbeddingReference();
  for (const auto& [name, pooling] : {std::pair{"last", PoolingType::kLast},
                                      std::pair{"mean", PoolingType::kMean}}) {
    for (size_t p = 0; p < ref["prompts"].size(); ++p) {
      const auto prompt = ref["prompts"][p].get<std::vector<int32_t>>();
      if (prompt.size() > max_prompt_tokens) continue;
      ++compared;
      const auto want = ref[name][p].get<std::vector<float>>();
      const std::vector<float> got =
          Embed(engine, block_size, pooling, prompt, chunk);
      ASSERT_EQ(got.size(), want.size());
      double dot = 0, diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        dot += static_cast<double>(got[i]) * want[i];
        diff = std::max(diff, std::fabs(double{got[i]} - want[i]));
      }
      std::cout << name << " pooling, " << prompt.size()
                << " tokens: 1 - cosine " << 1 - dot << ", max |diff| " << diff
                << "\n";
      EXPECT_GT(dot, 0.9999) << name << " prompt " << p;
      EXPECT_LT(diff, max_diff) << name << " prompt " << p;
    }
  }
  EXPECT_GT(compared, 0) << "no reference prompt of at most "
                         << max_prompt_tokens << " tokens";
}

}  // namespace paceline::engine::testing
