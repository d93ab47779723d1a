// Tokenizer::FromGguf: tokenizer.ggml.* metadata -> TokenizerVocab, with
// llama.cpp's defaults for keys the file leaves out.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::engine {
namespace {

// Reads an optional special-token id into `*id`. Absent keys and the "unset"
// values converters write (-1, 0xFFFFFFFF) keep the default; any other id
// outside the vocabulary is an error naming the key.
absl::Status ReadSpecialId(const GgufFile& file, absl::string_view key,
                           size_t n_tokens, int32_t* id) {
  if (!file.Has(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t value, file.GetInt(key));
  if (value == -1 || value == 0xFFFFFFFF) return absl::OkStatus();
  if (value < 0 || value >= static_cast<int64_t>(n_tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": token id ", value, " is outside the vocabulary (",
                     n_tokens, " tokens)"));
  }
  *id = static_cast<int32_t>(value);
  return absl::OkStatus();
}

absl::Status ReadBool(const GgufFile& file, absl::string_view key, bool* out) {
  if (!file.Has(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(*out, file.GetBool(key));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadStrings(const GgufFile& file,
                                                     absl::string_view key) {
  if (!file.Has(key)) {
    return absl::NotFoundError(absl::StrCat("missing metadata key ", key));
  }
  ASSIGN_OR_RETURN(const std::vector<absl::string_view> views,
                   file.GetStringArray(key));
  return std::vector<std::string>(views.begin(), views.end());
}

bool IsLlama3Pre(const std::string& pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" ||
         pre == "falcon3";
}

// llama.cpp sets RSTRIP on Phi-3's special tokens (so "</s>\n" eats the
// newline) except <unk>, <s> and <|endoftext|>.
void AddPhi3Strip(const GgufFile& file, TokenizerVocab* vocab) {
  if (!file.Has("general.name")) return;
  const absl::StatusOr<absl::string_view> name = file.GetString("general.name");
  if (!name.ok()) return;
  const std::string lower = absl::AsciiStrToLower(*name);
  if (!absl::StrContains(lower, "phi-3") && !absl::StrContains(lower, "phi3")) {
    return;
  }
  for (size_t i = 0; i < vocab->tokens.size(); ++i) {
    const std::string& text = vocab->tokens[i];
    const TokenType type = i < vocab->token_types.size() ? vocab->token_types[i]
                                                         : TokenType::kNormal;
    const bool special = type == TokenType::kControl ||
                         type == TokenType::kUserDefined ||
                         type == TokenType::kUnknown || text == "</s>";
    if (special && text != "<unk>" && text != "<s>" &&
        text != "<|endoftext|>") {
      vocab->rstrip_ids.push_back(static_cast<int32_t>(i));
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(
    const GgufFile& file) {
  TokenizerVocab vocab;
  if (!file.Has("tokenizer.ggml.model")) {
    return absl::NotFoundError("missing metadata key tokenizer.ggml.model");
  }
  ASSIGN_OR_RETURN(const absl::string_view model,
                   file.GetString("tokenizer.ggml.model"));
  vocab.model = std::string(model);
  if (file.Has("tokenizer.ggml.pre")) {
    ASSIGN_OR_RETURN(const absl::string_view pre,
                     file.GetString("tokenizer.ggml.pre"));
    vocab.pre = std::string(pre);
  }
  ASSIGN_OR_RETURN(vocab.tokens, ReadStrings(file, "tokenizer.ggml.tokens"));
  const size_t n = vocab.tokens.size();
  if (file.Has("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(vocab.scores, file.GetFloatArray("tokenizer.ggml.scores"));
  }
  if (file.Has("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                     file.GetIntArray("tokenizer.ggml.token_type"));
    vocab.token_types.reserve(types.size());
    for (int64_t type : types) {
      // Unknown values read as undefined, as in llama.cpp.
      vocab.token_types.push_back(type >= 0 && type <= 6
                                      ? static_cast<TokenType>(type)
                                      : TokenType::kUndefined);
    }
  }

  if (vocab.model == "llama") {
    // llama.cpp's SPM defaults.
    vocab.bos_id = n > 1 ? 1 : -1;
    vocab.eos_id = n > 2 ? 2 : -1;
    vocab.unk_id = 0;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  } else if (vocab.model == "gpt2") {
    // llama.cpp would default BOS/EOS to id 11 here; a file without the
    // keys gets none instead.
    ASSIGN_OR_RETURN(vocab.merges, ReadStrings(file, "tokenizer.ggml.merges"));
    vocab.add_bos = IsLlama3Pre(vocab.pre);
  }
  RETURN_IF_ERROR(
      ReadSpecialId(file, "tokenizer.ggml.bos_token_id", n, &vocab.bos_id));
  RETURN_IF_ERROR(
      ReadSpecialId(file, "tokenizer.ggml.eos_token_id", n, &vocab.eos_id));
  RETURN_IF_ERROR(
      ReadSpecialId(file, "tokenizer.ggml.unknown_token_id", n, &vocab.unk_id));
  RETURN_IF_ERROR(
      ReadSpecialId(file, "tokenizer.ggml.padding_token_id", n, &vocab.pad_id));
  for (absl::string_view key :
       {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int32_t id = -1;
    RETURN_IF_ERROR(ReadSpecialId(file, key, n, &id));
    if (id >= 0) vocab.eog_ids.push_back(id);
  }
  RETURN_IF_ERROR(
      ReadBool(file, "tokenizer.ggml.add_bos_token", &vocab.add_bos));
  RETURN_IF_ERROR(
      ReadBool(file, "tokenizer.ggml.add_eos_token", &vocab.add_eos));
  RETURN_IF_ERROR(ReadBool(file, "tokenizer.ggml.add_space_prefix",
                           &vocab.add_space_prefix));
  AddPhi3Strip(file, &vocab);
  return Create(std::move(vocab));
}

}  // namespace paceline::engine
