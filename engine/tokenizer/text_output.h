#ifndef PACELINE_ENGINE_TOKENIZER_TEXT_OUTPUT_H_
#define PACELINE_ENGINE_TOKENIZER_TEXT_OUTPUT_H_

// The text of one stream of generated token ids, as a client receives it:
// incremental detokenization (detokenizer.h) and stop strings. Run by the
// delivery side (server/delivery/stream_buffer.h), never by the engine
// thread, which stops only on EOS, stop token ids and max_tokens.
//
// Stop strings are matched on the detokenized text across token
// boundaries; the earliest match wins. Text up to the match is returned
// (plus the string itself with `include`), and nothing after it. Text that
// could be the start of a stop string is held back until a later token
// rules the match out, or until Flush.
//
// Thread-compatible; the Tokenizer must outlive it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine {

struct StopStrings {
  std::vector<std::string> strings;  // each non-empty
  bool include = false;              // deliver the matched string itself
};

class TextOutput {
 public:
  // `control_token_text`: control tokens contribute their vocabulary text
  // (a chat output parser looks for markers such as "[TOOL_CALLS]").
  TextOutput(const Tokenizer* tokenizer, StopStrings stop,
             bool control_token_text);

  // Appends `id`'s text; returns the text now certain. Once stopped(),
  // every later id returns "" and is not counted.
  std::string Push(int32_t id);
  // The stream has ended (EOS, max_tokens, a cut): the text held back, and
  // a U+FFFD for a dangling incomplete character. "" once stopped().
  std::string Flush();

  // A stop string was matched: the text ends with it (or before it).
  bool stopped() const { return !stop_string_.empty(); }
  // The matched stop string ("" until stopped()).
  const std::string& stop_string() const { return stop_string_; }
  // Ids pushed and counted: all of them, or up to and including the one
  // whose text completed the stop string.
  int32_t tokens() const { return tokens_; }

 private:
  // The earliest stop-string match in `text`: its position, and the string
  // in *matched (npos and unchanged when none).
  size_t FindStopString(absl::string_view text,
                        const std::string** matched) const;
  // The longest suffix of `text` that is a proper prefix of a stop string.
  size_t HoldBack(absl::string_view text) const;

  IncrementalDetokenizer detokenizer_;
  const StopStrings stop_;
  std::string held_;  // text held back for a possible stop string
  std::string stop_string_;
  int32_t tokens_ = 0;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_TEXT_OUTPUT_H_
