#include "engine/tokenizer/byte_level.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeByteLevelTokenizer(
    int64_t n_vocab) {
  constexpr int32_t kBos = 256;
  constexpr int32_t kEos = 257;
  if (n_vocab < kEos + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a byte-level vocabulary needs at least ", kEos + 1,
                     " tokens; the model has ", n_vocab));
  }
  TokenizerVocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "default";
  vocab.tokens.reserve(n_vocab);
  vocab.token_types.reserve(n_vocab);
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.push_back(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
    vocab.token_types.push_back(TokenType::kNormal);
  }
  vocab.tokens.push_back("<|bos|>");
  vocab.tokens.push_back("<|eos|>");
  vocab.token_types.push_back(TokenType::kControl);
  vocab.token_types.push_back(TokenType::kControl);
  for (int64_t i = kEos + 1; i < n_vocab; ++i) {
    vocab.tokens.push_back(absl::StrCat("<|filler_", i, "|>"));
    vocab.token_types.push_back(TokenType::kUnused);
  }
  vocab.bos_id = kBos;
  vocab.eos_id = kEos;
  vocab.add_bos = true;
  return Tokenizer::Create(std::move(vocab));
}

}  // namespace paceline::engine
