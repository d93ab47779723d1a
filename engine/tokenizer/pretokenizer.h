#ifndef PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_
#define PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_

// The pre-tokenizer of byte-level BPE models: splits text into the pieces
// ("words") that BPE merges never cross, exactly as llama.cpp does for each
// `tokenizer.ggml.pre` value.
//
// Each variant is a LIST of regexes applied in sequence (llama.cpp's
// description, and Hugging Face's Sequence of Split pre-tokenizers):
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
//   gpt-4o                 o200k (gpt-oss), as in Hugging Face's
//                          tokenizer.json, with real letter case (llama.cpp
//                          approximates the classes with ASCII [a-z]/[A-Z]):
//                          [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?
//                          |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+
//                          |\s+(?!\S)|\s+
//                          with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
//                          W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and
//                          C = (?i:'s|'t|'re|'ve|'m|'ll|'d)
//   deepseek-v3            \p{N}{1,3} ; [一-龥぀-ゟ゠-ヿ]+ ;
//                          [!-/:-@[-`{-~][A-Za-z]+
//                          |[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//                          | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Any other name is an error (as in llama.cpp, which refuses to load it).
//
// Normalization: qwen2 and deepseek-r1-qwen (Qwen's tokenizer.json declares
// "normalizer": NFC) want the text in NFC before the split; see
// normalize_nfc() and normalizer.h. The other variants' vocabularies declare
// no normalizer that changes text.
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
    kGpt4o,         // the o200k pattern above
    kNumber3,       // \p{N}{1,3}
    kCjkKana,       // [一-龥぀-ゟ゠-ヿ]+
    kDeepseekV3,    // the last deepseek-v3 regex above
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

  // The vocabulary's tokenizer normalizes its input to NFC first.
  bool normalize_nfc() const { return normalize_nfc_; }

  // Splits `text` (decoded with DecodeUtf8Lenient, so invalid bytes are
  // U+FFFD) into pieces, each returned as UTF-8; no piece is empty and their
  // concatenation is the decoded text re-encoded.
  std::vector<std::string> Split(absl::string_view text) const;

  // The same split over codepoints: the length (in codepoints) of each
  // piece, in order, summing to cpts.size().
  std::vector<size_t> SplitCodepoints(absl::Span<const uint32_t> cpts) const;

 private:
  PreTokenizer(std::string name, std::vector<Stage> stages, bool ignore_merges,
               bool normalize_nfc)
      : name_(std::move(name)),
        stages_(std::move(stages)),
        ignore_merges_(ignore_merges),
        normalize_nfc_(normalize_nfc) {}

  std::string name_;
  std::vector<Stage> stages_;
  bool ignore_merges_ = false;
  bool normalize_nfc_ = false;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_PRETOKENIZER_H_
