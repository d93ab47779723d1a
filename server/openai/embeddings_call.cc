#include "server/openai/embeddings_call.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "server/openai/embeddings_request.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"

namespace paceline::server::openai {

void StartEmbeddingsCall(Frontend* frontend, const TenantPolicy* tenant,
                         const http::HttpRequest& request,
                         std::shared_ptr<http::HttpExchange> exchange) {
  const auto refuse = [&](const absl::Status& status) {
    RespondError(*exchange, frontend->Rejected(tenant->name, status));
  };
  absl::StatusOr<EmbeddingsRequest> parsed =
      ParseEmbeddingsRequest(request.body);
  if (!parsed.ok()) return refuse(parsed.status());
  if (absl::Status s = FromCore(frontend->CheckModel(parsed->model)); !s.ok()) {
    return refuse(s);
  }
  if (absl::Status s =
          CheckDimensions(*parsed, frontend->model_config().n_embd);
      !s.ok()) {
    return refuse(s);
  }
  std::vector<std::vector<int32_t>> inputs = std::move(parsed->token_inputs);
  // Text as llama.cpp's server tokenizes it for embeddings: the model's
  // BOS, and its EOS where the file says add_eos_token (Qwen3-Embedding
  // pools the last token, which must be that EOS).
  const engine::Tokenizer& tokenizer = frontend->tokenizer();
  for (const std::string& text : parsed->texts) {
    inputs.push_back(frontend->TokenizeText(text, std::nullopt));
    if (tokenizer.add_eos() && tokenizer.eos_id() >= 0) {
      inputs.back().push_back(tokenizer.eos_id());
    }
  }
  const bool base64 = parsed->base64;
  absl::Status submitted = frontend->Embed(
      *tenant, std::move(inputs),
      [exchange, base64,
       model = frontend->model().id](absl::StatusOr<EmbeddingsResult> result) {
        if (!result.ok()) return RespondError(*exchange, result.status());
        RespondJson(*exchange,
                    EmbeddingsJson(result->vectors, result->prompt_tokens,
                                   model, base64));
      });
  // Embed counted its own refusals.
  if (!submitted.ok()) RespondError(*exchange, FromCore(submitted));
}

}  // namespace paceline::server::openai
