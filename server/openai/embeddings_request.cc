#include "server/openai/embeddings_request.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

constexpr char kInput[] = "input";

absl::StatusOr<std::vector<int32_t>> TokenIds(const Json& v,
                                              absl::string_view param) {
  if (absl::Status s = ExpectArray(v, param); !s.ok()) return s;
  if (v.empty())
    return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<int64_t> id =
        AsInt(v[i], Index(param, i), 0, std::numeric_limits<int32_t>::max());
    if (!id.ok()) return id.status();
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

absl::Status ReadInput(const Json& input, EmbeddingsRequest* out) {
  if (input.is_string()) {
    absl::StatusOr<std::string> text = AsString(input, kInput);
    if (!text.ok()) return text.status();
    if (text->empty()) return InvalidParam(kInput, "'input' is empty");
    out->texts.push_back(*std::move(text));
    return absl::OkStatus();
  }
  if (absl::Status s = ExpectArray(input, kInput); !s.ok()) return s;
  if (input.empty()) return InvalidParam(kInput, "'input' is empty");
  if (input.size() > kMaxEmbeddingInputs) {
    return InvalidParam(
        kInput, absl::StrCat("'input' has ", input.size(), " items; at most ",
                             kMaxEmbeddingInputs));
  }
  // number[]: one input of token ids.
  if (input[0].is_number()) {
    absl::StatusOr<std::vector<int32_t>> ids = TokenIds(input, kInput);
    if (!ids.ok()) return ids.status();
    out->token_inputs.push_back(*std::move(ids));
    return absl::OkStatus();
  }
  // string[] or number[][], one kind throughout.
  const bool texts = input[0].is_string();
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string param = Index(kInput, i);
    if (texts) {
      absl::StatusOr<std::string> text = AsString(input[i], param);
      if (!text.ok()) return text.status();
      if (text->empty()) {
        return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
      }
      out->texts.push_back(*std::move(text));
    } else {
      absl::StatusOr<std::vector<int32_t>> ids = TokenIds(input[i], param);
      if (!ids.ok()) return ids.status();
      out->token_inputs.push_back(*std::move(ids));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EmbeddingsRequest> ParseEmbeddingsRequest(
    absl::string_view body) {
  absl::StatusOr<Json> json = ParseBody(body);
  if (!json.ok()) return json.status();
  EmbeddingsRequest r;
  if (absl::Status s = OptionalString(*json, "model", "model", &r.model);
      !s.ok()) {
    return s;
  }
  const Json* input = Find(*json, kInput);
  if (input == nullptr) return InvalidParam(kInput, "'input' is required");
  if (absl::Status s = ReadInput(*input, &r); !s.ok()) return s;
  std::string format = "float";
  if (absl::Status s =
          OptionalString(*json, "encoding_format", "encoding_format", &format);
      !s.ok()) {
    return s;
  }
  if (format != "float" && format != "base64") {
    return InvalidParam("encoding_format",
                        absl::StrCat("'encoding_format' must be 'float' or "
                                     "'base64', got '",
                                     format, "'"));
  }
  r.base64 = format == "base64";
  if (const Json* d = Find(*json, "dimensions")) {
    absl::StatusOr<int64_t> dims =
        AsInt(*d, "dimensions", 1, std::numeric_limits<int32_t>::max());
    if (!dims.ok()) return dims.status();
    r.dimensions = *dims;
  }
  std::string user;
  if (absl::Status s = OptionalString(*json, "user", "user", &user); !s.ok()) {
    return s;
  }
  return r;
}

absl::Status CheckDimensions(const EmbeddingsRequest& request, int64_t n_embd) {
  if (!request.dimensions.has_value() || *request.dimensions == n_embd) {
    return absl::OkStatus();
  }
  return InvalidParam(
      "dimensions",
      absl::StrCat("this model does not declare Matryoshka embeddings, so "
                   "'dimensions' can only be its width, ",
                   n_embd, "; got ", *request.dimensions));
}

std::string Float32Base64(absl::Span<const float> v) {
  std::string bytes;
  bytes.reserve(v.size() * 4);
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    for (int b = 0; b < 4; ++b)
      bytes.push_back(static_cast<char>(u >> (8 * b)));
  }
  return absl::Base64Escape(bytes);
}

Json EmbeddingsJson(const std::vector<std::vector<float>>& vectors,
                    int64_t prompt_tokens, absl::string_view model,
                    bool base64) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    Json e = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      e["embedding"] = Float32Base64(vectors[i]);
    } else {
      e["embedding"] = vectors[i];
    }
    data.push_back(std::move(e));
  }
  return {
      {"object", "list"},
      {"data", std::move(data)},
      {"model", std::string(model)},
      {"usage",
       {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace paceline::server::openai
