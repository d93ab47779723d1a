#include "server/openai/openai_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/echo.h"
#include "server/openai/openai_call.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"

namespace paceline::server::openai {
namespace {

constexpr char kModelsPrefix[] = "/v1/models/";

// The methods a known path allows; "" for an unknown path.
absl::string_view AllowedMethod(absl::string_view path) {
  if (path == "/health" || path == "/v1/models" ||
      absl::StartsWith(path, kModelsPrefix)) {
    return "GET";
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions" ||
      path == "/tokenize" || path == "/detokenize") {
    return "POST";
  }
  return "";
}

absl::Status ModelNotFound(absl::string_view model, absl::string_view served) {
  return WithErrorCode(
      absl::NotFoundError(absl::StrCat("The model '", Echo(model),
                                       "' does not exist; this server serves '",
                                       served, "'")),
      "model_not_found");
}

// A body field `model`, when given, must name the served model.
absl::Status CheckBodyModel(const Json& body, const PacelineService& service) {
  const Json* model = Find(body, "model");
  if (model == nullptr) return absl::OkStatus();
  absl::StatusOr<std::string> name = AsString(*model, "model");
  if (!name.ok()) return name.status();
  if (!service.CheckModel(*name).ok()) {
    return ModelNotFound(*name, service.model_id());
  }
  return absl::OkStatus();
}

}  // namespace

OpenAiService::OpenAiService(PacelineService* service)
    : service_(service), created_(absl::ToUnixSeconds(absl::Now())) {}

std::pair<std::string, std::string> OpenAiService::ErrorBody(
    int status, absl::string_view message) {
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return {openai::ErrorBody(message, type, std::nullopt, std::nullopt),
          kJsonType};
}

void OpenAiService::Handle(http::HttpRequest request,
                           std::shared_ptr<http::HttpExchange> exchange) {
  const absl::string_view allowed = AllowedMethod(request.path);
  if (allowed.empty()) {
    return RespondError(
        *exchange,
        WithErrorCode(absl::NotFoundError(absl::StrCat(
                          "no route ", request.method, " ", request.path)),
                      "unknown_route"));
  }
  if (request.method != allowed) {
    ErrorResponse error =
        ToErrorResponse(absl::InvalidArgumentError(absl::StrCat(
            request.path, " takes ", allowed, ", not ", request.method)));
    return exchange->Respond(
        405, {{"Content-Type", kJsonType}, {"Allow", std::string(allowed)}},
        std::move(error.body));
  }
  if (request.path == "/health") return Health(*exchange);
  absl::StatusOr<const TenantPolicy*> tenant =
      service_->AuthenticateHeader(request.Header("authorization"));
  if (!tenant.ok()) return RespondError(*exchange, tenant.status());
  if (request.path == "/v1/models") return Models("", *exchange);
  if (absl::StartsWith(request.path, kModelsPrefix)) {
    return Models(
        absl::string_view(request.path).substr(sizeof(kModelsPrefix) - 1),
        *exchange);
  }
  // The rest is intake work (the body's JSON, a chat template, the
  // tokenizer): the intake pool's, charged to the tenant.
  const bool generation =
      request.path != "/tokenize" && request.path != "/detokenize";
  absl::Status posted = service_->RunIntake(
      **tenant, generation,
      [this, tenant = *tenant, request = std::move(request),
       exchange]() mutable { Work(tenant, request, std::move(exchange)); });
  if (!posted.ok()) RespondError(*exchange, posted);
}

void OpenAiService::Work(const TenantPolicy* tenant,
                         const http::HttpRequest& request,
                         std::shared_ptr<http::HttpExchange> exchange) {
  if (request.path == "/tokenize") return Tokenize(request, *exchange);
  if (request.path == "/detokenize") return Detokenize(request, *exchange);
  Generate(tenant, request, std::move(exchange));
}

void OpenAiService::Health(http::HttpExchange& exchange) const {
  const bool draining = service_->draining();
  exchange.Respond(
      draining ? 503 : 200, {{"Content-Type", kJsonType}},
      draining ? R"({"status":"draining"})" : R"({"status":"ok"})");
}

void OpenAiService::Models(absl::string_view id,
                           http::HttpExchange& exchange) const {
  const std::string& served = service_->model_id();
  Json model = ModelJson(served, created_, "paceline");
  // Beside OpenAI's fields, what load generators read from peers: vLLM's
  // max_model_len and llama.cpp's meta (paceline bench draws synthetic
  // prompt ids below meta.n_vocab).
  const int64_t context = service_->model_config().context_length;
  model["max_model_len"] = context;
  model["meta"] = {{"n_vocab", service_->tokenizer().vocab_size()},
                   {"n_ctx_train", context}};
  if (id.empty()) return RespondJson(exchange, ModelListJson({model}));
  if (id != served) return RespondError(exchange, ModelNotFound(id, served));
  RespondJson(exchange, model);
}

void OpenAiService::Tokenize(const http::HttpRequest& request,
                             http::HttpExchange& exchange) const {
  absl::StatusOr<Json> body = ParseBody(request.body);
  if (!body.ok()) return RespondError(exchange, body.status());
  if (absl::Status st = CheckBodyModel(*body, *service_); !st.ok()) {
    return RespondError(exchange, st);
  }
  const Json* prompt = Find(*body, "prompt");
  if (prompt == nullptr) {
    return RespondError(exchange,
                        InvalidParam("prompt", "'prompt' is required"));
  }
  absl::StatusOr<std::string> text = AsString(*prompt, "prompt");
  if (!text.ok()) return RespondError(exchange, text.status());
  std::optional<bool> add_special;
  if (const Json* v = Find(*body, "add_special_tokens")) {
    absl::StatusOr<bool> b = AsBool(*v, "add_special_tokens");
    if (!b.ok()) return RespondError(exchange, b.status());
    add_special = *b;
  }
  const std::vector<int32_t> ids = service_->TokenizeText(*text, add_special);
  RespondJson(exchange,
              TokenizeJson(ids, service_->model_config().context_length,
                           &service_->tokenizer()));
}

void OpenAiService::Detokenize(const http::HttpRequest& request,
                               http::HttpExchange& exchange) const {
  absl::StatusOr<Json> body = ParseBody(request.body);
  if (!body.ok()) return RespondError(exchange, body.status());
  if (absl::Status st = CheckBodyModel(*body, *service_); !st.ok()) {
    return RespondError(exchange, st);
  }
  const Json* tokens = Find(*body, "tokens");
  if (tokens == nullptr) {
    return RespondError(exchange,
                        InvalidParam("tokens", "'tokens' is required"));
  }
  if (absl::Status st = ExpectArray(*tokens, "tokens"); !st.ok()) {
    return RespondError(exchange, st);
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    absl::StatusOr<int64_t> id = AsInt((*tokens)[i], Index("tokens", i), 0,
                                       service_->tokenizer().vocab_size() - 1);
    if (!id.ok()) return RespondError(exchange, id.status());
    ids.push_back(static_cast<int32_t>(*id));
  }
  absl::StatusOr<std::string> text =
      service_->DetokenizeIds(ids, /*skip_special=*/true);
  if (!text.ok()) return RespondError(exchange, text.status());
  RespondJson(exchange, DetokenizeJson(*text));
}

void OpenAiService::Generate(const TenantPolicy* tenant,
                             const http::HttpRequest& request,
                             std::shared_ptr<http::HttpExchange> exchange) {
  const bool chat = request.path == "/v1/chat/completions";
  absl::StatusOr<OpenAiRequest> parsed =
      chat ? ParseChatCompletionRequest(request.body)
           : ParseCompletionRequest(request.body);
  if (!parsed.ok()) return RespondError(*exchange, parsed.status());
  if (!parsed->model.empty() && !service_->CheckModel(parsed->model).ok()) {
    return RespondError(*exchange,
                        ModelNotFound(parsed->model, service_->model_id()));
  }
  StartCompletionCall(service_, tenant, chat ? Api::kChat : Api::kCompletion,
                      *std::move(parsed), std::move(exchange));
}

}  // namespace paceline::server::openai
