#ifndef PACELINE_TESTS_TESTING_FAKE_ENGINE_H_
#define PACELINE_TESTS_TESTING_FAKE_ENGINE_H_

// An Engine without a model, for scheduler tests and benchmarks (STYLE.md
// 13). Its "K/V cache" is the token id at each slot of its block pool:
// Forward writes each slice's tokens at their slots, then, for a slice that
// wants logits, reads the sequence back through the slice's block table —
// positions [0, position_begin + token_count) — and asks the script for
// the next token. The logits row is 0 everywhere and 1 at that token, so
// greedy sampling returns it.
//
// Like a real model, the output is a function of the sequence's tokens as
// stored in its blocks: a scheduler that feeds wrong positions, wrong block
// tables, a wrong prefix-cache hit or a missed copy gets different tokens.
// Slots never written read as -1.
//
// Forward checks the batch's shape (the Engine contract: slices cover the
// tokens exactly once, tables cover the positions, ids in range, the step
// limit, the logits size) and returns InvalidArgument, changing nothing,
// when it is broken. Every step can be recorded for assertions.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"
#include "engine/model/model_config.h"
#include "kvpager/block_table.h"

namespace paceline::testing {

// The next token of a sequence whose tokens so far are `context`.
using TokenScript = std::function<int32_t(absl::Span<const int32_t> context)>;

// A deterministic default: a hash of the context mapped onto 'a'..'z'.
int32_t LetterScript(absl::Span<const int32_t> context);

struct FakeEngineOptions {
  int32_t n_vocab = 512;
  int64_t context_length = 1 << 20;
  int32_t block_size = 16;
  int32_t num_blocks = 1024;
  int32_t max_tokens_per_step = 512;
  bool record = true;  // keep every step (off for benchmarks)
  TokenScript script = LetterScript;
};

// A copy of one slice, its block table included.
struct RecordedSlice {
  int32_t token_begin = 0;
  int32_t token_count = 0;
  int32_t position_begin = 0;
  int32_t num_logits = 0;
  std::vector<int32_t> block_table;
  int32_t first_token = -1;  // the sequence's token at position 0
};

struct RecordedStep {
  std::vector<int32_t> tokens;
  std::vector<RecordedSlice> slices;
  std::vector<kvpager::BlockCopy> copies;  // run before this step
};

class FakeEngine final : public engine::Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options);

  const engine::ModelConfig& config() const override { return config_; }
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_blocks() const override { return options_.num_blocks; }
  int32_t max_tokens_per_step() const override {
    return options_.max_tokens_per_step;
  }

  absl::Status Forward(const engine::ForwardBatch& batch,
                       absl::Span<float> logits) override;
  absl::Status CopyBlocks(absl::Span<const kvpager::BlockCopy> copies) override;

  const std::vector<RecordedStep>& steps() const { return steps_; }
  int64_t num_forward_calls() const { return num_forward_calls_; }
  // The token stored at a slot (-1 if never written).
  int32_t slot(int64_t index) const { return slots_[index]; }

  // Fails the next Forward with `status` (once).
  void FailNextForward(absl::Status status) { fail_next_ = std::move(status); }

 private:
  absl::Status Check(const engine::ForwardBatch& batch,
                     absl::Span<float> logits) const;

  const FakeEngineOptions options_;
  engine::ModelConfig config_;
  std::vector<int32_t> slots_;  // (num_blocks * block_size)
  std::vector<int32_t> context_;
  std::vector<kvpager::BlockCopy> pending_copies_;
  std::vector<RecordedStep> steps_;
  int64_t num_forward_calls_ = 0;
  absl::Status fail_next_;
};

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_FAKE_ENGINE_H_
