#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_REASONING_GATE_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_REASONING_GATE_H_

// A constraint that starts after the reasoning block (issue 35: with a
// reasoning model, the constraint holds for the answer, not the thinking).
// It wraps the constraint's token mask and opens it where the chat
// module's output parser starts the content:
//
//   start      (the prompt did not open reasoning) the output may open it:
//              whitespace tokens, the open marker or a token spelling part
//              of it; or the content starts at once (the inner mask's
//              tokens). Once part of the marker is read, only the rest of
//              it.
//   reasoning  every token but end of generation, until the close marker
//              (a token that closes it and goes on with more than
//              whitespace is not allowed: those bytes would be the
//              content's, and the inner mask reads whole tokens);
//   gap        after the close marker: whitespace tokens (the parser trims
//              them) or the inner mask's tokens;
// Whitespace before the answer (start and gap) is bounded, as the JSON
// grammar bounds its gaps: past kMaxLeadingSpace bytes only the answer's
// tokens (or, in start, the open marker) are allowed, so a model that
// likes blank lines cannot idle there until max_tokens.
//   content    the inner mask alone, fast-forward included.
//
// End of generation is allowed only in content, where the inner mask
// allows it: a reasoning model must still give its answer in the
// constraint's language. Control tokens among the markers (no bytes) are
// read as their text. Thread-compatible, like every TokenMask; clones share
// the immutable part.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/token_mask.h"

namespace paceline::engine::grammar {

struct ReasoningMarkers {
  std::string open;   // e.g. "<think>"; empty: only starts_in_reasoning
  std::string close;  // e.g. "</think>"; required
  // Control tokens among the markers, with their text.
  std::vector<std::pair<int32_t, std::string>> tokens;
  bool starts_in_reasoning = false;  // the prompt opened the block
};

inline constexpr size_t kMaxLeadingSpace = 16;

class ReasoningGate : public TokenMask {
 public:
  ReasoningGate(std::shared_ptr<const TokenTrie> vocab,
                ReasoningMarkers markers, std::unique_ptr<TokenMask> inner);
  ReasoningGate(const ReasoningGate& other);

  void Fill(absl::Span<uint32_t> allowed) override;
  absl::Status Accept(int32_t token) override;
  std::unique_ptr<TokenMask> Clone() const override;
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) const override;

  enum class Region : uint8_t { kStart, kReasoning, kGap, kContent };
  Region region() const { return region_; }

  struct Shared;

 private:
  void FillStart(absl::Span<uint32_t> allowed);
  void FillReasoning(absl::Span<uint32_t> allowed) const;
  void FillGap(absl::Span<uint32_t> allowed);
  absl::Status AcceptStart(int32_t token);
  absl::Status AcceptReasoning(int32_t token);
  // Whitespace tokens that fit under kMaxLeadingSpace; reads one.
  void AllowSpace(absl::Span<uint32_t> allowed) const;
  bool TakeSpace(absl::string_view text);

  std::shared_ptr<const Shared> shared_;
  std::unique_ptr<TokenMask> inner_;
  Region region_;
  std::string pending_;  // kStart: the open marker's bytes read so far
  std::string tail_;     // kReasoning: the last bytes, up to the close's
  size_t space_ = 0;     // kStart, kGap: whitespace bytes read
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_REASONING_GATE_H_
