#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MASK_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MASK_H_

// The token mask of a tool-call constraint (tool_call_grammar.h): a grammar
// mask (grammar_mask.h, the same semantics) with two additions.
//
// Marker tokens. A call syntax's markers (`[TOOL_CALLS]`, `[ARGS]`,
// `<|python_tag|>`) are control tokens in some vocabularies: no bytes, so a
// grammar over bytes alone could never allow them, yet the model writes
// them and the output parser reads them as their text. Given each such
// token's text, the mask allows the token exactly where the grammar can
// read that text, and reads it when the token is accepted. (Where the
// grammar reads such text, e.g. inside a JSON string, the token is
// allowed there too; the parser sees the same text either way.)
//
// Lazy (tool_choice auto with strict tools): with triggers, the output is
// free (every token allowed) until it opens a call: a trigger's text
// appears in the text the parser reads (tokens' bytes, the listed control
// tokens as their text) outside reasoning — reasoning is recognised as the
// parser does: the open marker at the very start (leading whitespace
// allowed) or starts_in_reasoning, up to the close marker. From the
// trigger on the grammar holds, read from the trigger's first byte (the
// auto grammar starts with each trigger's text); its end allows only end
// of generation. A token that completes a trigger and goes on is allowed
// only when the grammar reads the bytes after the trigger. End of
// generation in the free part is allowed (no call).
//
// Thread-compatible, like every TokenMask; clones share the immutable
// part (tables, options, the tokens that may complete a trigger).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "engine/sampling/token_mask.h"

namespace paceline::engine::grammar {

struct ToolCallMaskOptions {
  // Control tokens of the call syntax's markers (ToolCallMarkers), each
  // with its text. Tokens with bytes need no entry.
  std::vector<std::pair<int32_t, std::string>> marker_tokens;
  // Empty: the grammar holds from the first token (required, named).
  // Otherwise (auto): free text until one of these opens a call.
  std::vector<CallTrigger> triggers;
  // Lazy only: the reasoning markers (both empty: none), control tokens
  // among them with their text, and whether the output starts inside
  // reasoning (the prompt opened it).
  std::string reasoning_open;
  std::string reasoning_close;
  std::vector<std::pair<int32_t, std::string>> reasoning_tokens;
  bool starts_in_reasoning = false;
};

class ToolCallMask : public TokenMask {
 public:
  // InvalidArgument when a trigger is not where the grammar starts.
  static absl::StatusOr<std::unique_ptr<ToolCallMask>> Create(
      std::shared_ptr<MaskTables> tables, ToolCallMaskOptions options);

  void Fill(absl::Span<uint32_t> allowed) override;
  absl::Status Accept(int32_t token) override;
  std::unique_ptr<TokenMask> Clone() const override;
  // Inside a call: the bytes the grammar forces up to the first marker's
  // text (a marker token is the model's to write); none in free text.
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) const override;

  // A call has been opened (always, without triggers).
  bool in_call() const { return in_call_; }
  bool ended() const { return ended_; }

  // The free part of the output, as far as triggers go (internal, in the
  // header for copying).
  struct FreeText {
    enum class Region : uint8_t { kStart, kReasoning, kContent };
    Region region = Region::kContent;
    std::string pending;  // kStart: non-whitespace bytes, maybe an open marker
    std::string tail;     // the region's last bytes (longest watched text)
    size_t content_bytes = 0;  // kContent: since its first non-whitespace
  };
  struct Shared;

 private:
  explicit ToolCallMask(std::shared_ptr<const Shared> shared);

  void FillFree(absl::Span<uint32_t> allowed) const;
  void FillCall(absl::Span<uint32_t> allowed) const;
  absl::Status AcceptFree(absl::string_view text);

  std::shared_ptr<const Shared> shared_;
  FreeText free_;
  Matcher matcher_;
  bool in_call_ = false;
  bool ended_ = false;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MASK_H_
