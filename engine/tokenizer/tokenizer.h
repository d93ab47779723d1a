#ifndef PACELINE_ENGINE_TOKENIZER_TOKENIZER_H_
#define PACELINE_ENGINE_TOKENIZER_TOKENIZER_H_

// Text <-> token ids for the two GGUF tokenizer models, matching llama.cpp's
// `llama_tokenize(..., add_special, parse_special=false)` id for id:
//
//  - "llama": SentencePiece-style BPE. The text gets one leading space
//    (`add_space_prefix`, default true) at its start and after every special
//    token, spaces become U+2581 '▁', then adjacent symbols merge while their
//    concatenation is a token, highest score first (ties: leftmost). Symbols
//    that are not tokens come out as byte tokens <0xXX> (byte fallback).
//  - "gpt2": byte-level BPE. The text is put in NFC first where the
//    vocabulary's tokenizer does that (Qwen's; see pretokenizer.h), then the
//    pre-tokenizer of `tokenizer.ggml.pre` (see
//    engine/pretokenizer.h) splits it; each piece is mapped
//    byte-by-byte through GPT-2's byte-to-unicode table and merged by rank
//    (lowest first, ties leftmost) using `tokenizer.ggml.merges`.
//
// Before either, the text is cut around user-defined tokens (always, longest
// first, as llama.cpp does) and around control tokens when
// EncodeOptions::parse_special is set.
//
// Decisions where llama.cpp would abort or is vague:
//  - An unknown `tokenizer.ggml.pre` for a gpt2 model is an error (llama.cpp
//    refuses such a model too; guessing a split silently degrades output).
//    A missing `pre` means "default", as in llama.cpp. SPM ignores `pre`.
//  - A byte with no byte token (SPM) becomes `unk_id`, or is dropped when
//    there is none (llama.cpp throws).
//  - Invalid UTF-8 input: SPM keeps the bytes (they become byte tokens);
//    byte-level BPE sees U+FFFD for each invalid byte, as in llama.cpp.
//  - Duplicate token strings: the last id wins for lookups (llama.cpp does
//    the same); empty token strings read as "[EMPTY_<id>]".
//  - Tokens named like end-of-turn / fill-in-the-middle markers
//    ("<|im_end|>", "<|eot_id|>", "<|fim_prefix|>", ...) are treated as
//    control tokens even when typed otherwise, as llama.cpp does.
//
// Thread-safety: immutable after construction; all const methods may run
// concurrently.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/pretokenizer.h"

namespace paceline::engine {

// `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything a Tokenizer is built from, as plain values. FromGguf() fills it
// from the file (applying llama.cpp's defaults); tests build it by hand.
struct TokenizerVocab {
  std::string model;            // "llama" or "gpt2"
  std::string pre = "default";  // pre-tokenizer name (gpt2 only)
  std::vector<std::string> tokens;
  std::vector<float> scores;           // empty, or one per token (SPM)
  std::vector<TokenType> token_types;  // empty (all normal), or one per token
  std::vector<std::string> merges;     // gpt2: "left right", rank = index
  int32_t bos_id = -1;                 // -1: none
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;  // the model wants BOS prepended
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM leading-space rule
  // Special tokens that eat the whitespace on their right / left when the
  // text is cut around them (llama.cpp sets these per model name, e.g. for
  // Phi-3).
  std::vector<int32_t> rstrip_ids;
  std::vector<int32_t> lstrip_ids;
  // More end-of-generation tokens than EOS and the named end-of-turn texts:
  // the file's tokenizer.ggml.eot_token_id / eom_token_id.
  std::vector<int32_t> eog_ids;
};

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

struct EncodeOptions {
  bool add_bos = false;        // prepend BOS when the model has one
  bool parse_special = false;  // recognise control-token text in the input
  // With parse_special: stretches of the input (sorted, disjoint) where
  // control and unknown tokens are NOT recognised; a match overlapping one
  // stays plain text. User-defined tokens are matched everywhere, as in
  // plain text. Chat prompts mark the text that came from the request this
  // way (chat_prompt.h). The ranges must outlive the call.
  absl::Span<const TextRange> plain_ranges;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,
  // bos_token_id,eos_token_id,unknown_token_id,padding_token_id,
  // eot_token_id,eom_token_id,add_bos_token,add_eos_token,add_space_prefix}
  // and general.name.
  // Absent keys take llama.cpp's defaults: "llama" has BOS 1, EOS 2, UNK 0,
  // add_bos and add_space_prefix; "gpt2" has no special ids (llama.cpp would
  // guess 11) and add_bos only for the Llama-3 pre-tokenizers. An id of -1 or
  // 0xFFFFFFFF ("unset", as converters write it) also keeps the default.
  // Errors (InvalidArgument / NotFound / Unimplemented) name the key.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(
      const GgufFile& file);

  // Validates `vocab`: array lengths, ids in range, merges naming known
  // tokens whose concatenation is a token, byte tokens spelled <0xXX>,
  // known model and (gpt2) pre-tokenizer, a BOS/EOS id when add_bos/add_eos.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      TokenizerVocab vocab);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // No special-token parsing; BOS only when `add_bos` and the model has one
  // (pass add_bos() for the model's own preference). EOS is never added.
  std::vector<int32_t> Encode(absl::string_view text, bool add_bos) const;
  std::vector<int32_t> Encode(absl::string_view text,
                              const EncodeOptions& options) const;

  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }

  // Per-token queries; ids outside [0, vocab_size) are kUndefined / false /
  // empty.
  TokenType token_type(int32_t id) const;
  bool IsControl(int32_t id) const;
  // End of generation: EOS, the file's EOT/EOM ids, and the end-of-turn
  // texts llama.cpp names ("<|eot_id|>", "<|im_end|>", "<end_of_turn>", ...).
  bool IsEog(int32_t id) const;
  // The token's vocabulary string (e.g. "▁the", "Ġthe", "<0x0A>").
  const std::string& TokenText(int32_t id) const;
  float TokenScore(int32_t id) const;
  // The id of a vocabulary string, -1 when absent.
  int32_t TokenId(absl::string_view text) const;

  // The raw bytes a token stands for in output text: SPM '▁' -> ' ' and
  // <0xAB> -> the byte 0xAB; gpt2 undoes the byte-to-unicode mapping
  // (codepoints outside it are kept as UTF-8); user-defined tokens are their
  // text; control, unknown, unused and undefined tokens are empty. The bytes
  // may be a fragment of a UTF-8 sequence.
  const std::string& TokenBytes(int32_t id) const;
  // The most input bytes one token can stand for (the longest TokenBytes
  // or vocabulary string, at least 1): text of B bytes encodes to at least
  // B / max_token_bytes() tokens, so a byte count can refuse text over a
  // token limit without encoding it.
  size_t max_token_bytes() const { return max_token_bytes_; }

  // Concatenated TokenBytes, leading spaces kept (no clean-up of spaces
  // before punctuation). The result may hold invalid UTF-8; see
  // SanitizeUtf8() and IncrementalDetokenizer.
  std::string Decode(absl::Span<const int32_t> ids) const;

 private:
  Tokenizer() = default;

  // Create's steps, in order, on a checked vocabulary.
  // The id of every text, end-of-generation marks, forced control types.
  absl::Status IndexTokens(absl::Span<const int32_t> eog_ids);
  void ApplyEogWorkarounds();  // llama.cpp's per-family exceptions
  absl::Status MarkStrips(absl::Span<const int32_t> lstrip_ids,
                          absl::Span<const int32_t> rstrip_ids);
  void FindByteTokens();  // SPM: byte_tokens_
  absl::Status InitBpe(const std::vector<std::string>& merges);  // gpt2
  void ListSpecialTokens();  // user_defined_ids_, special_ids_
  void ComputeTokenBytes();  // bytes_

  // One stretch of input: raw text, or a special token cut out of it.
  struct Fragment {
    int32_t token = -1;  // >= 0: a special token
    absl::string_view text;
  };
  std::vector<Fragment> Partition(absl::string_view text, bool parse_special,
                                  absl::Span<const TextRange> plain) const;

  void EncodeSpm(absl::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpe(absl::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpeWord(absl::string_view word, std::vector<int32_t>* out) const;

  // Constant after Create().
  std::string model_;
  std::string pre_;
  bool is_spm_ = false;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::vector<uint8_t> strip_;  // bit 1: lstrip, bit 2: rstrip
  std::vector<bool> eog_;
  std::vector<std::string> bytes_;  // TokenBytes cache
  size_t max_token_bytes_ = 1;      // see max_token_bytes()
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  // SPM: the token for each byte (-1: none).
  std::vector<int32_t> byte_tokens_;
  // gpt2: (left id << 32 | right id) -> merge.
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::unique_ptr<PreTokenizer> pretokenizer_;
  // Tokens cut out before encoding, longest text first.
  std::vector<int32_t> user_defined_ids_;
  std::vector<int32_t> special_ids_;  // user-defined + control + unknown
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_TOKENIZER_H_
