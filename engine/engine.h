#ifndef PACELINE_ENGINE_ENGINE_H_
#define PACELINE_ENGINE_ENGINE_H_

// The model engine as the scheduler sees it, whatever the backend (CPU,
// CUDA): one forward pass over a batch of sequences per call, with K/V kept
// in a pool of fixed-size blocks that the engine owns and the pager
// (kvpager/) hands out by id.
//
// Contract of a step (see forward_batch.h for the value itself):
//  - Each slice's tokens are appended to its sequence at positions
//    [position_begin, position_begin + token_count): their K/V are written
//    into the slots that the slice's block table gives for those positions
//    (position p lives in block_table[p / block_size()], slot
//    p % block_size()), and each token attends causally to every position
//    up to its own through the same table. K/V of earlier positions must
//    already be in the blocks (written by earlier steps or copied by
//    CopyBlocks); the engine does not check that.
//  - Slices must cover the batch's tokens exactly once. Two slices must not
//    write the same block slot in one step.
//  - The result is one row of n_vocab float logits for each of the last
//    num_logits tokens of each slice: slice order, then token order. A
//    token's row is the same whether its slice asks for one row or more.
//  - Slices may also ask for hidden rows (SequenceSlice::num_hidden): the
//    last layer's output after the output norm, the vector an embedding
//    model pools, written into ForwardBatch::hidden in the same order.
//  - The result for a token depends only on its sequence's tokens and
//    positions, never on what else shares the step (batch invariance).
//
// Errors: InvalidArgument for a malformed batch (nothing is written then,
// neither K/V nor logits); other codes for failures inside the backend.
//
// Thread-safety: one thread drives an engine (DESIGN.md §2: the engine
// thread); calls must not overlap. The engine may use its own worker
// threads inside a call.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/forward_batch.h"
#include "engine/model/model_config.h"
#include "engine/sampling/row_sampling.h"
#include "kvpager/block_table.h"

namespace paceline::engine {

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const ModelConfig& config() const = 0;
  // Tokens per KV block, and blocks in the pool (ids 0 .. num_blocks() - 1).
  virtual int32_t block_size() const = 0;
  virtual int32_t num_blocks() const = 0;
  // The most tokens one step may carry (the sum over its slices).
  virtual int32_t max_tokens_per_step() const = 0;

  // The groups its layers' K/V come in (engine/model/kv_layout.h), by
  // window in positions, 0 = full history: one block table per group in
  // each slice (SequenceSlice::group_tables) when more than one. The
  // default, one full group, keeps every layer's whole history: correct
  // for any model, without the sliding windows' saving (the CUDA engine,
  // for now).
  virtual std::vector<int32_t> kv_group_windows() const { return {0}; }

  // Runs one step. `logits` must hold exactly NumLogitRows(batch) × n_vocab
  // floats: the slices' rows in slice order, each slice's in token order.
  //   logits: (num_logit_rows, n_vocab)
  virtual absl::Status Forward(const ForwardBatch& batch,
                               absl::Span<float> logits) = 0;

  // Whether ForwardAndSample samples on the accelerator, so that only token
  // ids come back to the host: what makes it worth calling. The default
  // (false) samples on the host after Forward, which is correct but gains
  // nothing over the host sampler.
  virtual bool samples_on_device() const { return false; }

  // Whether Forward returns hidden rows (SequenceSlice::num_hidden), which
  // embedding requests need. The default: it does not.
  virtual bool returns_hidden() const { return false; }

  // Forward, with the logit rows that `sampling` marks in_engine sampled by
  // the engine instead of returned (row_sampling.h: SampleRow's rule, the
  // same token on every backend for the same row). sampling[j] and
  // tokens[j] belong to logit row j; both hold exactly the logit rows.
  // For an in_engine row, tokens[j] receives the token (negative: a
  // non-finite logit, NonFiniteLogitId) and logits row j is left
  // unspecified; for any other row, logits row j is written as by Forward
  // and tokens[j] is left alone. `logits` is sized as for Forward.
  // `before_sampling`, when set, is called once after the forward pass and
  // before any RowSampling::allowed is read (the token masks are filled on
  // other threads meanwhile, scheduler/mask_fill_pool.h).
  virtual absl::Status ForwardAndSample(
      const ForwardBatch& batch, absl::Span<const RowSampling> sampling,
      absl::Span<int32_t> tokens, absl::Span<float> logits,
      const std::function<void()>& before_sampling = {});

  // Runs the pager's copy-on-write copies (kvpager/block_table.h: every
  // layer's K and V of block src into block dst), in order (a later copy
  // may read an earlier one's dst). InvalidArgument (and nothing copied)
  // when an id is out of range.
  virtual absl::Status CopyBlocks(
      absl::Span<const kvpager::BlockCopy> copies) = 0;

  // Recurrent-state slots (hybrid models, SequenceSlice::state_slot): ids
  // 0 .. num_state_slots() - 1, each holding one sequence's state in every
  // DeltaNet layer (ModelConfig::RecurrentStateBytes). 0 for a model
  // without DeltaNet layers.
  virtual int32_t num_state_slots() const { return 0; }
  // Copies slot src's state into slot dst for each copy, in order.
  // InvalidArgument (nothing copied) when an id is out of range.
  virtual absl::Status CopyStates(absl::Span<const kvpager::StateCopy> copies);
};

// What an engine checks a step against.
struct BatchLimits {
  int64_t n_vocab = 0;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int32_t max_tokens_per_step = 0;
  // n_embd when the backend returns hidden rows; 0 when it does not (a
  // batch asking for them is then InvalidArgument).
  int64_t hidden_width = 0;
  // Engine::kv_group_windows() when more than one group or a windowed
  // one (block_table is then that group's); empty = one full group.
  std::vector<int32_t> group_windows = {};
  // Engine::num_state_slots(): every slice then names its own slot in
  // [0, num_state_slots); none (-1) when 0.
  int32_t num_state_slots = 0;
};

// The contract above, checked for every backend: 1..max_tokens_per_step
// tokens with ids in the vocabulary, `logits_size` = logit rows × n_vocab,
// each slice non-empty inside the batch at non-negative positions (below
// 2^31) with 0..token_count logit rows, 0..token_count hidden rows (none
// unless limits.hidden_width, and batch.hidden sized for them) and a block
// table that covers them with ids in the pool (one per group with several
// groups; a windowed group's only from the window of position_begin on),
// and every token in exactly one slice, and, with state slots, a distinct
// slot per slice. On success `owner[t]` (sized for at least the batch's tokens) is token
// t's slice; on failure InvalidArgument "forward batch: ..." naming the slice /
// token / entry.
absl::Status CheckForwardBatch(const ForwardBatch& batch, size_t logits_size,
                               const BatchLimits& limits,
                               absl::Span<int32_t> owner);

// ForwardAndSample's shape check: `sampling` and `tokens` sized to the
// batch's logit rows; InvalidArgument "forward batch: ..." otherwise.
absl::Status CheckSamplingRows(const ForwardBatch& batch, size_t sampling,
                               size_t tokens);

// Blocks a slice's table must cover (its positions up to the last token).
inline int64_t BlocksNeeded(const SequenceSlice& slice, int32_t block_size) {
  const int64_t end = int64_t{slice.position_begin} + slice.token_count;
  return (end + block_size - 1) / block_size;
}

// The number of logit rows `batch` asks for.
inline int32_t NumLogitRows(const ForwardBatch& batch) {
  int32_t n = 0;
  for (const SequenceSlice& s : batch.sequences) n += s.num_logits;
  return n;
}

// The number of hidden rows `batch` asks for.
inline int32_t NumHiddenRows(const ForwardBatch& batch) {
  int32_t n = 0;
  for (const SequenceSlice& s : batch.sequences) n += s.num_hidden;
  return n;
}

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_ENGINE_H_
