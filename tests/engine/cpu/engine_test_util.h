#ifndef PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_
#define PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_

// Greedy generation helpers shared by the CPU engine tests.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"

namespace paceline::engine::testing {

// The largest logit; ties go to the lowest id (the sampler's greedy rule).
inline int32_t Argmax(absl::Span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) -
                              row.begin());
}

struct GreedyResult {
  std::vector<int32_t> tokens;             // (n_generate)
  std::vector<std::vector<float>> logits;  // (n_generate, n_vocab)
};

// One sequence alone: the prompt in chunks of `chunk` tokens (0 = all at
// once), then `n_generate` greedy decode steps, its K/V in blocks
// `blocks` (enough for prompt + n_generate positions).
inline absl::StatusOr<GreedyResult> GenerateAlone(
    Engine& engine, const std::vector<int32_t>& prompt, int64_t n_generate,
    int64_t chunk, absl::Span<const int32_t> blocks) {
  const int64_t n_vocab = engine.config().n_vocab;
  GreedyResult result;
  std::vector<float> logits(n_vocab);
  ForwardBatch batch;
  batch.sequences.resize(1);
  SequenceSlice& slice = batch.sequences[0];
  slice.block_table = blocks;
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (chunk <= 0) chunk = n_prompt;
  for (int64_t done = 0; done < n_prompt; done += chunk) {
    const int64_t take = std::min(chunk, n_prompt - done);
    batch.tokens.assign(prompt.begin() + done, prompt.begin() + done + take);
    slice.token_count = static_cast<int32_t>(take);
    slice.position_begin = static_cast<int32_t>(done);
    slice.needs_logits = done + take == n_prompt;
    RETURN_IF_ERROR(engine.Forward(
        batch,
        absl::MakeSpan(logits.data(), slice.needs_logits ? n_vocab : 0)));
  }
  for (int64_t i = 0; i < n_generate; ++i) {
    result.logits.push_back(logits);
    result.tokens.push_back(Argmax(logits));
    if (i + 1 == n_generate) break;
    batch.tokens.assign(1, result.tokens.back());
    slice.token_count = 1;
    slice.position_begin = static_cast<int32_t>(n_prompt + i);
    slice.needs_logits = true;
    RETURN_IF_ERROR(engine.Forward(batch, absl::MakeSpan(logits)));
  }
  return result;
}

// Blocks first, first + 1, ... enough for `positions` positions.
inline std::vector<int32_t> ContiguousBlocks(const Engine& engine,
                                             int64_t positions,
                                             int32_t first = 0) {
  std::vector<int32_t> blocks((positions + engine.block_size() - 1) /
                              engine.block_size());
  std::iota(blocks.begin(), blocks.end(), first);
  return blocks;
}

}  // namespace paceline::engine::testing

#endif  // PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_
