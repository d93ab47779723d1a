#ifndef PACELINE_ENGINE_TOKENIZER_DETOKENIZER_H_
#define PACELINE_ENGINE_TOKENIZER_DETOKENIZER_H_

// Streaming token ids -> text that is always valid UTF-8.
//
// A token may end in the middle of a character (byte-fallback tokens carry
// one byte each; byte-level BPE tokens can split a character too). Push()
// returns only complete characters and holds an incomplete tail back until
// later tokens complete it. Bytes that can never form a character become
// U+FFFD, one per maximal ill-formed subpart (Unicode's recommended
// practice); Flush() turns a dangling incomplete tail into one U+FFFD.
//
// Leading space: SentencePiece tokens start words with a space ("▁Once" is
// " Once"). By default every space is kept, which is right for streaming a
// continuation after a prompt: llama-server's completion of "Once upon a
// time" starts with ",", and a next word starts with its own " ". Set
// `strip_leading_space` to drop one space at the very start of the output,
// as llama.cpp's detokenize does when the text was encoded with
// add_space_prefix (e.g. to print a whole decoded prompt); it applies to
// the first pushed token only, like llama.cpp's `lstrip` of the first piece.
//
// Control tokens contribute no text, unless `control_token_text` is set:
// then each control token contributes its vocabulary text (e.g.
// "[TOOL_CALLS]", "<|python_tag|>"), which a chat output parser needs to see
// (chat_output.h). End-of-generation tokens are never pushed: generation
// stops on them. Thread-compatible: one stream per
// instance; the Tokenizer must outlive it.

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine {

class IncrementalDetokenizer {
 public:
  struct Options {
    bool strip_leading_space = false;
    bool control_token_text = false;
  };

  explicit IncrementalDetokenizer(const Tokenizer* tokenizer);
  IncrementalDetokenizer(const Tokenizer* tokenizer, Options options);

  // Appends the token's bytes and returns the text that became complete
  // (possibly empty).
  std::string Push(int32_t id);

  // Ends the stream: returns U+FFFD if an incomplete character is pending
  // (else ""), and resets the instance for a new stream.
  std::string Flush();

  // Bytes held back waiting for the rest of a character (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  Options options_;
  bool first_token_ = true;
  std::string pending_;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_DETOKENIZER_H_
