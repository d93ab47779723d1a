#ifndef PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_
#define PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_

// The pre-tokenizer of byte-level BPE models: splits text into the pieces
// ("words") that BPE merges never cross, exactly as llama.cpp does for each
// `tokenizer.ggml.pre` value.
//
// llama.cpp describes each variant as a LIST of regexes applied in sequence:
// every regex splits each piece produced by the previous one into its matches
// and the unmatched gaps between them (a gap stays one piece). Some regexes
// have hand-written matchers there (the GPT-2 and Llama-3 patterns), the rest
// run through std::regex on a "category-collapsed" copy of the text. Here
// every regex is a hand-written matcher over codepoints with the same
// observable splits; the classes mean:
//   \p{L} \p{N} \p{P}  the category bits of engine/unicode.h
//   \s                 the whitespace bit (Unicode White_Space)
//
// Variants (`pre` name -> regex list, in order):
//   default, ""            [\p{P}$+<=>^~|]+ ; GPT-2 ; \p{N}+ ; [0-9]{3}
//   gpt-2, phi-2, mpt, olmo, jais, jina-es, jina-de, gigachat,
//   jina-v2-es, jina-v2-de GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+
//                          | ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b
//                          \p{N} ; GPT-2
//   falcon                 [\p{P}$+<=>^~|`]+ ; GPT-2 ; [0-9]{3}
//   deepseek-coder         [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ;
//                          [U+0800-U+9FA5 U+AC00-U+D7FF]+ ; \p{N}
//   llama3, llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe
//                          Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)
//                          |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//                          | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2, deepseek-r1-qwen, stablelm2, megrez
//                          the Llama-3 pattern with \p{N} instead of \p{N}{1,3}
// Any other name is an error (as in llama.cpp, which refuses to load it).
//
// Thread-safety: immutable after Create(); Split() may run concurrently.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paceline::engine {

class PreTokenizer {
 public:
  // One regex of a variant's list.
  enum class Stage {
    kGpt2,          // the GPT-2 pattern above
    kLlama3,        // the Llama-3 pattern above
    kQwen2,         // Llama-3 with single digits
    kPunctDefault,  // [\p{P}\$\+<=>\^~\|]+
    kPunctFalcon,   // [\p{P}\$\+<=>\^~\|`]+
    kNumber,        // \p{N}
    kNumberRun,     // \p{N}+
    kAsciiDigits3,  // [0-9][0-9][0-9]
    kNewline,       // [\r\n]
    kSpaceLetters,  // \s?\p{L}+
    kSpacePunct,    // \s?\p{P}+
    kCjk,           // [一-龥ࠀ-一가-퟿]+ (non-whitespace codepoints)
  };

  // InvalidArgument for a name not listed above.
  static absl::StatusOr<PreTokenizer> Create(absl::string_view pre);
  // A pre-tokenizer running exactly `stages` (tests).
  static PreTokenizer FromStages(std::string name, std::vector<Stage> stages);

  absl::string_view name() const { return name_; }
  const std::vector<Stage>& stages() const { return stages_; }

  // Llama-3 variants look a whole piece up in the vocabulary before merging
  // (llama.cpp's `ignore_merges`).
  bool ignore_merges() const { return ignore_merges_; }

  // Splits `text` (decoded with DecodeUtf8Lenient, so invalid bytes are
  // U+FFFD) into pieces, each returned as UTF-8; no piece is empty and their
  // concatenation is the decoded text re-encoded.
  std::vector<std::string> Split(absl::string_view text) const;

  // The same split over codepoints: the length (in codepoints) of each
  // piece, in order, summing to cpts.size().
  std::vector<size_t> SplitCodepoints(absl::Span<const uint32_t> cpts) const;

 private:
  PreTokenizer(std::string name, std::vector<Stage> stages, bool ignore_merges)
      : name_(std::move(name)),
        stages_(std::move(stages)),
        ignore_merges_(ignore_merges) {}

  std::string name_;
  std::vector<Stage> stages_;
  bool ignore_merges_ = false;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_
