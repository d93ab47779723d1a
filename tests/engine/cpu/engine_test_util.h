#ifndef PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_
#define PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_

// Greedy generation helpers shared by the CPU engine tests.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"
#include "engine/sampling/row_sampling.h"
#include "gtest/gtest.h"

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
    slice.num_logits = done + take == n_prompt ? 1 : 0;
    RETURN_IF_ERROR(engine.Forward(
        batch, absl::MakeSpan(logits.data(), slice.num_logits * n_vocab)));
  }
  for (int64_t i = 0; i < n_generate; ++i) {
    result.logits.push_back(logits);
    result.tokens.push_back(Argmax(logits));
    if (i + 1 == n_generate) break;
    batch.tokens.assign(1, result.tokens.back());
    slice.token_count = 1;
    slice.position_begin = static_cast<int32_t>(n_prompt + i);
    slice.num_logits = 1;
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

// Engine::ForwardAndSample against Forward on the same step: a batch of
// three prompts (K/V in separate blocks), run by Forward, then again by
// ForwardAndSample with row 0 greedy and row 1 sampled in the engine, each
// under a token mask (row 0's bans its argmax; row 1's allows even ids),
// and row 2 returned as logits. The engine must give SampleRow's token for
// Forward's rows — for row 0 the best logit but one — and row 2's logits
// bit for bit (the same step twice is deterministic on every backend), and
// leave row 2's token alone; and it must reject sampling spans that do not
// match the logit rows.
inline void ExpectForwardAndSampleMatchesForward(Engine& engine) {
  const int64_t vocab = engine.config().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3, 4, 5}, {1, 7, 9}, {1, 5, 5, 5, 2, 8, 11}};
  ForwardBatch batch;
  std::vector<std::vector<int32_t>> tables;
  int32_t next_block = 0;
  for (const std::vector<int32_t>& p : prompts) {
    tables.push_back(ContiguousBlocks(engine, p.size(), next_block));
    next_block += static_cast<int32_t>(tables.back().size());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceSlice slice;
    slice.token_begin = batch.num_tokens();
    slice.token_count = static_cast<int32_t>(prompts[i].size());
    slice.block_table = tables[i];
    slice.num_logits = 1;
    batch.tokens.insert(batch.tokens.end(), prompts[i].begin(),
                        prompts[i].end());
    batch.sequences.push_back(slice);
  }
  std::vector<float> want(3 * vocab);
  ASSERT_TRUE(engine.Forward(batch, absl::MakeSpan(want)).ok());

  auto row = [&](const std::vector<float>& v, int64_t j) {
    return absl::MakeConstSpan(v.data() + j * vocab, vocab);
  };
  const int32_t best = Argmax(row(want, 0));
  int32_t second = best == 0 ? 1 : 0;
  for (int32_t id = 0; id < vocab; ++id) {
    if (id != best && want[id] > want[second]) second = id;
  }
  std::vector<uint32_t> not_best(MaskWords(vocab), ~0u);
  not_best[best / 32] &= ~(1u << (best % 32));
  const std::vector<uint32_t> even(MaskWords(vocab), 0x55555555u);

  std::vector<RowSampling> sampling(3);
  sampling[0].in_engine = true;  // greedy
  sampling[0].allowed = not_best.data();
  sampling[1].in_engine = true;
  sampling[1].temperature = 0.8f;
  sampling[1].top_k = 40;
  sampling[1].top_p = 0.9f;
  sampling[1].uniform = 0.37;
  sampling[1].allowed = even.data();
  sampling[2].temperature = 1.0f;  // on the host
  std::vector<int32_t> tokens = {-7, -7, -7};
  std::vector<float> got(3 * vocab, -1.0f);
  const absl::Status s = engine.ForwardAndSample(
      batch, sampling, absl::MakeSpan(tokens), absl::MakeSpan(got));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(tokens[0], second);
  EXPECT_EQ(tokens[1], SampleRow(row(want, 1), sampling[1]));
  EXPECT_EQ(tokens[1] % 2, 0);
  EXPECT_EQ(tokens[2], -7);
  EXPECT_TRUE(std::equal(want.begin() + 2 * vocab, want.end(),
                         got.begin() + 2 * vocab));

  std::vector<int32_t> two(2);
  const absl::Status bad = engine.ForwardAndSample(
      batch, absl::MakeConstSpan(sampling).subspan(0, 2), absl::MakeSpan(two),
      absl::MakeSpan(got));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
}

}  // namespace paceline::engine::testing

#endif  // PACELINE_TESTS_ENGINE_CPU_ENGINE_TEST_UTIL_H_
