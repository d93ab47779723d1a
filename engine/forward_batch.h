#ifndef PACELINE_ENGINE_FORWARD_BATCH_H_
#define PACELINE_ENGINE_FORWARD_BATCH_H_

// The value that describes one engine step: the tokens of several
// sequences, flattened, each sequence bringing any number of tokens (a
// prefill chunk, or one decode token) at its own positions, with its KV
// block table. The scheduler builds it; an Engine runs it.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace paceline::engine {

struct SequenceSlice {
  // This step's tokens of the sequence are
  // ForwardBatch::tokens[token_begin, token_begin + token_count).
  int32_t token_begin = 0;
  int32_t token_count = 0;
  // Position of the first of them: the number of the sequence's tokens whose
  // K/V are already in its blocks. Token i of the slice sits at position
  // position_begin + i and attends to positions [0, position_begin + i].
  int32_t position_begin = 0;
  // Physical KV block of each logical block of the sequence, covering at
  // least position_begin + token_count positions (block_size per block).
  // A view: the caller keeps the table alive for the step.
  absl::Span<const int32_t> block_table;
  // Logits rows the engine returns for the slice: one for each of its last
  // num_logits tokens (in [0, token_count]), in token order. 1 for a
  // sequence about to sample its next token; more to verify draft tokens
  // (speculative decoding: the rows of a token and of the drafts after it).
  int32_t num_logits = 0;
  // Hidden-state rows the engine returns for the slice (embeddings): the
  // final hidden state after the output norm, one for each of its last
  // num_hidden tokens (in [0, token_count]), in token order, into
  // ForwardBatch::hidden. Only backends that say so (BatchLimits::
  // hidden_width) accept them.
  int32_t num_hidden = 0;
  // The sequence's recurrent-state slot (Engine::num_state_slots(), hybrid
  // models: one state per DeltaNet layer): the state after its first
  // position_begin tokens, zeroed by the engine where position_begin is 0,
  // and left after all of the slice's tokens. -1 for a model without
  // DeltaNet layers. (Last but one, with group_tables, so that designated
  // initializers may leave them out.)
  int32_t state_slot = -1;
  // (Last, so that designated initializers may leave it out.)
  // With more than one KV group (Engine::kv_group_windows): one table per
  // group, group_tables[0] being block_table, each covering the positions
  // as block_table does; a windowed group's entries of blocks wholly
  // before the window of position_begin may be kvpager::kNoBlock (never
  // read). Empty with one group. A view, as block_table.
  absl::Span<const absl::Span<const int32_t>> group_tables = {};
};

struct ForwardBatch {
  std::vector<int32_t> tokens;           // (num_tokens)
  std::vector<SequenceSlice> sequences;  // (num_sequences), any order
  // Where the engine writes the slices' hidden rows, slice order then token
  // order; exactly NumHiddenRows × n_embd floats (empty when none are
  // asked for). The caller owns the storage and keeps it for the step.
  absl::Span<float> hidden;  // (num_hidden_rows, n_embd)

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_FORWARD_BATCH_H_
