#include "server/openai/openai_request.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_options.h"

namespace paceline::server::openai {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::Status TokenIds(const Json& ids, absl::string_view param,
                      v1::TokenIds* out) {
  if (ids.empty()) {
    return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSIGN_OR_RETURN(const int64_t id,
                     AsInt(ids[i], Index(param, i), 0, kInt32Max));
    out->add_ids(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

// One prompt of a batch: a string or a list of token ids.
absl::Status BatchItem(const Json& item, absl::string_view param,
                       v1::GenerateRequest* request) {
  if (item.is_string()) {
    request->set_text(item.get<std::string>());
    return absl::OkStatus();
  }
  if (item.is_array()) {
    return TokenIds(item, param, request->mutable_token_ids());
  }
  return InvalidParam(param, absl::StrCat("'", param,
                                          "' must be a string or "
                                          "an array of token ids, got ",
                                          TypeName(item)));
}

// prompt: string | string[] | int[] | int[][]. The first element of a list
// decides whether it is one token prompt or a batch.
absl::Status Prompts(const Json& body, const v1::GenerateRequest& base,
                     OpenAiRequest* out) {
  const Json* prompt = Find(body, "prompt");
  if (prompt == nullptr) return InvalidParam("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    out->prompts.push_back(base);
    out->prompts.back().set_text(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array()) {
    return InvalidParam("prompt", absl::StrCat("'prompt' must be a string or "
                                               "an array, got ",
                                               TypeName(*prompt)));
  }
  if (prompt->empty()) return InvalidParam("prompt", "'prompt' is empty");
  if ((*prompt)[0].is_number()) {
    out->prompts.push_back(base);
    return TokenIds(*prompt, "prompt", out->prompts.back().mutable_token_ids());
  }
  if (prompt->size() > kMaxBatchPrompts) {
    return InvalidParam(
        "prompt", absl::StrCat("'prompt' holds at most ", kMaxBatchPrompts,
                               " prompts, got ", prompt->size()));
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    out->prompts.push_back(base);
    RETURN_IF_ERROR(
        BatchItem((*prompt)[i], Index("prompt", i), &out->prompts.back()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(absl::string_view body) {
  ASSIGN_OR_RETURN(const Json json, ParseBody(body));
  OpenAiRequest out;
  v1::GenerateRequest base;
  RETURN_IF_ERROR(
      ParseSharedOptions(json, Endpoint::kCompletions, &out, &base));
  RETURN_IF_ERROR(Prompts(json, base, &out));
  return out;
}

}  // namespace paceline::server::openai
