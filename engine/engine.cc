#include "engine/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

absl::Status BadBatch(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("forward batch: ", what));
}

// One group's table: it covers the slice's positions, with ids in the pool
// from the first block the window of position_begin reaches (every block
// for a full group, window 0).
template <typename Where>
absl::Status CheckTable(absl::Span<const int32_t> table,
                        const SequenceSlice& slice, int32_t window,
                        const BatchLimits& limits, const Where& where) {
  const int64_t end = int64_t{slice.position_begin} + slice.token_count;
  const int64_t blocks_needed = BlocksNeeded(slice, limits.block_size);
  if (static_cast<int64_t>(table.size()) < blocks_needed) {
    return where(absl::StrCat("positions up to ", end, " need ",
                              blocks_needed, " blocks; the table has ",
                              table.size()));
  }
  const int64_t first =
      window > 0 ? std::max<int64_t>(0, slice.position_begin - window + 1) /
                       limits.block_size
                 : 0;
  for (int64_t b = first; b < blocks_needed; ++b) {
    const int32_t id = table[b];
    if (id < 0 || id >= limits.num_blocks) {
      return where(absl::StrCat("block table entry ", b, " is ", id,
                                "; the pool has ", limits.num_blocks,
                                " blocks"));
    }
  }
  return absl::OkStatus();
}

// Slice s's state slot: in [0, slots) and no earlier slice's with slots,
// -1 without.
absl::Status CheckStateSlot(const ForwardBatch& batch, size_t s,
                            int32_t slots) {
  const int32_t slot = batch.sequences[s].state_slot;
  if (slots == 0) {
    if (slot == -1) return absl::OkStatus();
    return BadBatch(absl::StrCat("sequence ", s, ": state slot ", slot,
                                 " for a model without recurrent state"));
  }
  if (slot < 0 || slot >= slots) {
    return BadBatch(absl::StrCat("sequence ", s, ": state slot ", slot,
                                 "; want 0 to ", slots - 1));
  }
  for (size_t o = 0; o < s; ++o) {
    if (batch.sequences[o].state_slot == slot) {
      return BadBatch(absl::StrCat("sequence ", s, ": state slot ", slot,
                                   " is also sequence ", o, "'s"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSamplingRows(const ForwardBatch& batch, size_t sampling,
                               size_t tokens) {
  const size_t rows = static_cast<size_t>(NumLogitRows(batch));
  if (sampling != rows || tokens != rows) {
    return BadBatch(absl::StrCat(rows, " logit rows, but ", sampling,
                                 " sampling entries and room for ", tokens,
                                 " tokens"));
  }
  return absl::OkStatus();
}

absl::Status Engine::ForwardAndSample(
    const ForwardBatch& batch, absl::Span<const RowSampling> sampling,
    absl::Span<int32_t> tokens, absl::Span<float> logits,
    const std::function<void()>& before_sampling) {
  RETURN_IF_ERROR(CheckSamplingRows(batch, sampling.size(), tokens.size()));
  RETURN_IF_ERROR(Forward(batch, logits));
  if (before_sampling) before_sampling();
  const int32_t rows = NumLogitRows(batch);
  const size_t vocab = static_cast<size_t>(config().n_vocab);
  for (int32_t j = 0; j < rows; ++j) {
    if (!sampling[j].in_engine) continue;
    tokens[j] = SampleRow(logits.subspan(j * vocab, vocab), sampling[j]);
  }
  return absl::OkStatus();
}

absl::Status Engine::CopyStates(absl::Span<const kvpager::StateCopy> copies) {
  if (copies.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "state copies for an engine without recurrent-state slots");
}

absl::Status CheckForwardBatch(const ForwardBatch& batch, size_t logits_size,
                               const BatchLimits& limits,
                               absl::Span<int32_t> owner) {
  const int64_t n = batch.num_tokens();
  if (n < 1 || n > limits.max_tokens_per_step) {
    return BadBatch(
        absl::StrCat(n, " tokens; want 1 to ", limits.max_tokens_per_step));
  }
  if (owner.size() < static_cast<size_t>(n)) {
    return BadBatch(
        absl::StrCat("room for ", owner.size(), " tokens, not ", n));
  }
  for (int64_t t = 0; t < n; ++t) {
    if (batch.tokens[t] < 0 || batch.tokens[t] >= limits.n_vocab) {
      return BadBatch(absl::StrCat("token ", t, " is id ", batch.tokens[t],
                                   ", outside the vocabulary of ",
                                   limits.n_vocab));
    }
  }
  std::fill(owner.begin(), owner.begin() + n, -1);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& slice = batch.sequences[s];
    const auto where = [s](absl::string_view what) {
      return BadBatch(absl::StrCat("sequence ", s, ": ", what));
    };
    if (slice.token_count < 1 || slice.token_begin < 0 ||
        slice.token_begin > n - slice.token_count) {
      return where(absl::StrCat("tokens [", slice.token_begin, ", +",
                                slice.token_count, ") are not inside the ", n,
                                " tokens of the batch"));
    }
    if (slice.position_begin < 0) return where("negative position");
    if (slice.num_logits < 0 || slice.num_logits > slice.token_count) {
      return where(absl::StrCat(slice.num_logits, " logit rows for ",
                                slice.token_count, " tokens"));
    }
    if (slice.num_hidden < 0 || slice.num_hidden > slice.token_count) {
      return where(absl::StrCat(slice.num_hidden, " hidden rows for ",
                                slice.token_count, " tokens"));
    }
    if (slice.num_hidden > 0 && limits.hidden_width == 0) {
      return where("this backend returns no hidden rows (embeddings)");
    }
    const int64_t end = int64_t{slice.position_begin} + slice.token_count;
    if (end > (int64_t{1} << 31) - 1) return where("position overflow");
    const size_t groups = std::max<size_t>(1, limits.group_windows.size());
    if (groups > 1 ? slice.group_tables.size() != groups
                   : slice.group_tables.size() > 1) {
      return where(absl::StrCat(slice.group_tables.size(),
                                " group tables; the engine has ", groups,
                                " KV groups"));
    }
    for (size_t g = 0; g < groups; ++g) {
      const absl::Span<const int32_t> table =
          groups > 1 ? slice.group_tables[g] : slice.block_table;
      const int32_t window =
          limits.group_windows.empty() ? 0 : limits.group_windows[g];
      RETURN_IF_ERROR(CheckTable(table, slice, window, limits, where));
    }
    RETURN_IF_ERROR(CheckStateSlot(batch, s, limits.num_state_slots));
    for (int32_t i = 0; i < slice.token_count; ++i) {
      const int32_t t = slice.token_begin + i;
      if (owner[t] >= 0) {
        return where(
            absl::StrCat("token ", t, " is also in sequence ", owner[t]));
      }
      owner[t] = static_cast<int32_t>(s);
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    if (owner[t] < 0) {
      return BadBatch(absl::StrCat("token ", t, " belongs to no sequence"));
    }
  }
  // Each slice's rows are within its tokens (checked above), so the sum is
  // at most n.
  const size_t rows = static_cast<size_t>(NumLogitRows(batch));
  if (logits_size != rows * static_cast<size_t>(limits.n_vocab)) {
    return BadBatch(absl::StrCat("logits hold ", logits_size, " floats; ", rows,
                                 " rows of ", limits.n_vocab, " want ",
                                 rows * limits.n_vocab));
  }
  const size_t hidden_rows = static_cast<size_t>(NumHiddenRows(batch));
  const size_t hidden_want =
      hidden_rows * static_cast<size_t>(limits.hidden_width);
  if (batch.hidden.size() != hidden_want) {
    return BadBatch(absl::StrCat("hidden holds ", batch.hidden.size(),
                                 " floats; ", hidden_rows, " rows want ",
                                 hidden_want));
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine
