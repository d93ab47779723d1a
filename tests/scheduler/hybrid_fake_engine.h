#ifndef PACELINE_TESTS_SCHEDULER_HYBRID_FAKE_ENGINE_H_
#define PACELINE_TESTS_SCHEDULER_HYBRID_FAKE_ENGINE_H_

// The fake engine (tests/testing/fake_engine.h) with recurrent-state slots,
// as a hybrid model's engine has them (engine.h, Engine::num_state_slots):
// a slot's "state" is the list of tokens fed into it since it was zeroed,
// which is what a recurrent state summarises. Forward checks the batch
// against the engine contract (CheckForwardBatch: a distinct slot per
// slice), zeroes a slot where its slice starts at position 0, requires the
// state to hold exactly the slice's first position_begin tokens, appends
// the slice's tokens, and then requires the state to equal the sequence's
// tokens as its K/V blocks hold them. A scheduler that names the wrong
// slot, misses a fork's copy, lets a rejected draft advance the state or
// resumes a preempted sequence on a stale one fails the step
// (InternalError, counted in mismatches()). CopyStates copies lists.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"
#include "kvpager/block_table.h"
#include "tests/testing/fake_engine.h"

namespace paceline::scheduler::testing {

class HybridFakeEngine final : public engine::Engine {
 public:
  HybridFakeEngine(::paceline::testing::FakeEngineOptions options,
                   int32_t num_state_slots)
      : inner_(options), states_(static_cast<size_t>(num_state_slots)) {}

  const engine::ModelConfig& config() const override { return inner_.config(); }
  int32_t block_size() const override { return inner_.block_size(); }
  int32_t num_blocks() const override { return inner_.num_blocks(); }
  int32_t max_tokens_per_step() const override {
    return inner_.max_tokens_per_step();
  }
  int32_t num_state_slots() const override {
    return static_cast<int32_t>(states_.size());
  }

  absl::Status CopyBlocks(
      absl::Span<const kvpager::BlockCopy> copies) override {
    return inner_.CopyBlocks(copies);
  }
  absl::Status CopyStates(
      absl::Span<const kvpager::StateCopy> copies) override {
    for (const kvpager::StateCopy& c : copies) {
      if (c.src < 0 || c.src >= num_state_slots() || c.dst < 0 ||
          c.dst >= num_state_slots()) {
        return absl::InvalidArgumentError("state copy out of range");
      }
    }
    for (const kvpager::StateCopy& c : copies) states_[c.dst] = states_[c.src];
    state_copies_ += static_cast<int64_t>(copies.size());
    return absl::OkStatus();
  }

  absl::Status Forward(const engine::ForwardBatch& batch,
                       absl::Span<float> logits) override {
    engine::BatchLimits limits;
    limits.n_vocab = config().n_vocab;
    limits.block_size = block_size();
    limits.num_blocks = num_blocks();
    limits.max_tokens_per_step = max_tokens_per_step();
    limits.num_state_slots = num_state_slots();
    owner_.resize(static_cast<size_t>(batch.num_tokens()));
    absl::Status status = engine::CheckForwardBatch(
        batch, logits.size(), limits, absl::MakeSpan(owner_));
    if (!status.ok()) return status;
    status = inner_.Forward(batch, logits);
    if (!status.ok()) return status;
    for (const engine::SequenceSlice& s : batch.sequences) {
      used_slots_.push_back(s.state_slot);
      std::vector<int32_t>& state = states_[s.state_slot];
      if (s.position_begin == 0) state.clear();
      if (static_cast<int32_t>(state.size()) != s.position_begin) {
        return Mismatch(
            absl::StrCat("slot ", s.state_slot, " holds ", state.size(),
                         " tokens, the slice starts at ", s.position_begin));
      }
      state.insert(state.end(), batch.tokens.begin() + s.token_begin,
                   batch.tokens.begin() + s.token_begin + s.token_count);
      const int32_t bs = block_size();
      for (int32_t p = 0; p < static_cast<int32_t>(state.size()); ++p) {
        const int64_t kv = int64_t{s.block_table[p / bs]} * bs + p % bs;
        if (inner_.slot(kv) != state[p]) {
          return Mismatch(absl::StrCat(
              "slot ", s.state_slot, " differs from the K/V at position ", p));
        }
      }
      max_slices_ =
          std::max(max_slices_, static_cast<int32_t>(batch.sequences.size()));
    }
    return absl::OkStatus();
  }

  int64_t mismatches() const { return mismatches_; }
  int64_t state_copies() const { return state_copies_; }
  // Every slice's slot, in step and slice order.
  const std::vector<int32_t>& used_slots() const { return used_slots_; }
  // The most slices one step carried.
  int32_t max_slices() const { return max_slices_; }

 private:
  absl::Status Mismatch(const std::string& what) {
    ++mismatches_;
    return absl::InternalError(what);
  }

  ::paceline::testing::FakeEngine inner_;
  std::vector<std::vector<int32_t>> states_;  // (slots) tokens fed
  std::vector<int32_t> owner_;
  std::vector<int32_t> used_slots_;
  int64_t mismatches_ = 0;
  int64_t state_copies_ = 0;
  int32_t max_slices_ = 0;
};

}  // namespace paceline::scheduler::testing

#endif  // PACELINE_TESTS_SCHEDULER_HYBRID_FAKE_ENGINE_H_
