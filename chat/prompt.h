#ifndef PACELINE_CHAT_PROMPT_H_
#define PACELINE_CHAT_PROMPT_H_

// A chat request's prompt tokens: the model's chat template rendered over
// the request, then tokenized so that control tokens are recognised only
// where the template put them (DESIGN.md §4: "Text rendered by a chat
// template is tokenized with special tokens recognised, user text never
// is").
//
// How:
//  1. Protect. In every string of the render context (object values and
//     keys, at any depth; not the top-level `bos_token` / `eos_token`, which
//     are the model's own), each occurrence of a protected token's text --
//     the vocabulary's control and unknown tokens, "<|im_start|>",
//     "<|eot_id|>", "<s>", ... -- becomes a placeholder made of code points
//     from the Supplementary Private Use Area-A: U+F0000, the token's index
//     in hex digits U+F0010..U+F001F, U+F0001. A code point of that alphabet
//     (U+F0000..U+F001F) already in the text becomes U+F0000 U+F0002 and
//     itself, so no input can forge a placeholder.
//  2. Render the template over the protected context.
//  3. Restore. Each placeholder becomes its original text again, and the
//     byte range it takes in the rendered text is recorded. A placeholder
//     the template cut apart (slicing) stays as its private-use code points.
//  4. Tokenize with control tokens recognised, except inside the recorded
//     ranges (EncodeOptions::plain_ranges): there they are plain text.
//  5. BOS: when the first token is already BOS (the template wrote
//     `bos_token`), none is added; otherwise one is when the model's
//     add_bos says so.
//
// What templates do with request strings is unchanged wherever no protected
// token's text appears in them: user-defined tokens (Qwen's "<think>",
// "<tool_call>") are not protected -- they are matched in plain text too,
// as llama.cpp does -- so a template that splits content on "</think>" or
// strips it sees the text as sent. In a string that does spell a control
// token the template sees the placeholder instead (its length and
// characters differ), and the text comes back as plain tokens.
//
// The limit of the guarantee: a control token's text that the template
// itself assembles out of pieces of request strings (two request strings
// printed back to back that together spell "<|im_end|>", or a `replace`
// that removes what separated the pieces) is not a placeholder and is
// recognised. No shipped template in ../shared/chat_templates does either.
//
// Thread-safety: immutable after construction; Render may run concurrently.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace paceline::chat {

struct ChatPrompt {
  // The rendered prompt, request text restored: what the template wrote.
  std::string text;
  // Where `text` holds request text that stays plain (restored
  // placeholders), sorted and disjoint.
  std::vector<engine::TextRange> plain;
  // The prompt's token ids, BOS included when one belongs there.
  std::vector<int32_t> tokens;
};

class ChatPromptEncoder {
 public:
  // Context nesting deeper than this is refused (Protect recurses).
  static constexpr int kMaxDepth = 128;

  // `tokenizer` must outlive the encoder.
  explicit ChatPromptEncoder(const engine::Tokenizer* tokenizer);

  // Steps 1-5. Errors: those of Protect, and the template's (unchanged).
  absl::StatusOr<ChatPrompt> Render(const ChatTemplate& chat_template,
                                    const nlohmann::ordered_json& context,
                                    const ChatRenderOptions& options) const;

  // Step 1 alone: `context` with every string protected. InvalidArgument
  // when it nests deeper than kMaxDepth.
  absl::StatusOr<nlohmann::ordered_json> Protect(
      const nlohmann::ordered_json& context) const;
  // One string, protected.
  std::string ProtectString(absl::string_view text) const;
  // Steps 3-5 on a rendered text.
  ChatPrompt Encode(absl::string_view rendered) const;

 private:
  absl::Status ProtectValue(nlohmann::ordered_json& value, int depth) const;
  // The protected token at the start of `text`, longest first; -1 if none.
  int32_t MatchAt(absl::string_view text) const;

  // Constant after construction.
  const engine::Tokenizer* tokenizer_;
  std::vector<int32_t> protected_ids_;  // index (placeholder) -> token id
  // First byte -> indices into protected_ids_, longer texts first.
  absl::flat_hash_map<unsigned char, std::vector<int32_t>> by_first_byte_;
};

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_PROMPT_H_
