#include "server/openai/openai_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/router.h"
#include "server/openai/chat_answer.h"
#include "server/openai/embeddings_call.h"
#include "server/openai/generation_call.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"
#include "server/openai/responses_call.h"

namespace paceline::server::openai {

std::vector<OpenAiService::ApiRoute> OpenAiService::OpenAiRoutes() {
  auto route = [this](const char* method, const char* path, bool needs_key,
                      Runs runs, void (OpenAiService::*handler)(RouteCall&)) {
    ApiRoute r;
    r.pattern = {method, path};
    r.needs_key = needs_key;
    r.runs = runs;
    r.handler = [this, handler](RouteCall& call) { (this->*handler)(call); };
    return r;
  };
  const Runs gen = Runs::kOnIntakeGeneration;
  return {
      route("GET", "/health", false, Runs::kNow, &OpenAiService::Health),
      route("GET", "/v1/models", true, Runs::kNow, &OpenAiService::Models),
      route("GET", "/v1/models/{id}", true, Runs::kNow, &OpenAiService::Models),
      route("POST", "/v1/completions", true, gen, &OpenAiService::Completions),
      route("POST", "/v1/chat/completions", true, gen,
            &OpenAiService::ChatCompletions),
      route("POST", "/v1/responses", true, gen, &OpenAiService::Responses),
      route("POST", "/v1/embeddings", true, gen, &OpenAiService::Embeddings),
      // A stored response's routes ({id}, {id}/input_items, {id}/cancel):
      // nothing is stored.
      route("GET", "/v1/responses/{id}", true, Runs::kNow,
            &OpenAiService::StoredResponse),
      route("POST", "/v1/responses/{id}", true, Runs::kNow,
            &OpenAiService::StoredResponse),
      route("DELETE", "/v1/responses/{id}", true, Runs::kNow,
            &OpenAiService::StoredResponse),
      route("POST", "/tokenize", true, Runs::kOnIntake,
            &OpenAiService::Tokenize),
      route("POST", "/detokenize", true, Runs::kOnIntake,
            &OpenAiService::Detokenize),
  };
}

namespace {

// The frontend's one check of a model name, as OpenAI names its refusal.
absl::Status CheckModel(const Frontend& frontend, absl::string_view model) {
  return FromCore(frontend.CheckModel(model));
}

// A body field `model`, when given, must name the served model.
absl::Status CheckBodyModel(const Json& body, const Frontend& frontend) {
  const Json* model = Find(body, "model");
  if (model == nullptr) return absl::OkStatus();
  absl::StatusOr<std::string> name = AsString(*model, "model");
  if (!name.ok()) return name.status();
  return CheckModel(frontend, *name);
}

}  // namespace

OpenAiService::OpenAiService(Frontend* frontend)
    : frontend_(frontend), created_(absl::ToUnixSeconds(absl::Now())) {
  AddRoutes(OpenAiRoutes());
}

void OpenAiService::AddRoutes(std::vector<ApiRoute> routes) {
  for (ApiRoute& r : routes) {
    patterns_.push_back(r.pattern);
    routes_.push_back(std::move(r));
  }
}

void OpenAiService::Refuse(const ApiRoute& route, http::HttpExchange& exchange,
                           const absl::Status& status) {
  if (route.respond_error) return route.respond_error(exchange, status);
  RespondError(exchange, status);
}

void OpenAiService::RefuseCall(RouteCall& call, const absl::Status& status) {
  const absl::string_view tenant =
      call.tenant != nullptr ? absl::string_view(call.tenant->name) : "";
  RespondError(*call.exchange, frontend_->Rejected(tenant, status));
}

std::pair<std::string, std::string> OpenAiService::ErrorBody(
    int status, absl::string_view message) {
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return {openai::ErrorBody(message, type, std::nullopt, std::nullopt),
          kJsonType};
}

void OpenAiService::Handle(http::HttpRequest request,
                           std::shared_ptr<http::HttpExchange> exchange) {
  http::RouteMatch match =
      http::MatchRoute(patterns_, request.method, request.path);
  if (match.route < 0 && match.allowed.empty()) {
    return RespondError(
        *exchange,
        frontend_->Rejected("", WithErrorCode(absl::NotFoundError(absl::StrCat(
                                                  "no route ", request.method,
                                                  " ", request.path)),
                                              "unknown_route")));
  }
  if (match.route < 0) {
    ErrorResponse error = ToErrorResponse(frontend_->Rejected(
        "", absl::InvalidArgumentError(absl::StrCat(request.path, " takes ",
                                                    match.allowed, ", not ",
                                                    request.method))));
    return exchange->Respond(
        405, {{"Content-Type", kJsonType}, {"Allow", match.allowed}},
        std::move(error.body));
  }
  const ApiRoute& route = routes_[match.route];
  RouteCall call{nullptr, std::move(request), std::move(match.param),
                 std::move(exchange)};
  if (route.needs_key) {
    std::string authorization(call.request.Header("authorization"));
    if (route.takes_x_api_key && authorization.empty()) {
      const absl::string_view key = call.request.Header("x-api-key");
      if (!key.empty()) authorization = absl::StrCat("Bearer ", key);
    }
    absl::StatusOr<const TenantPolicy*> tenant =
        frontend_->Authenticate(authorization);
    if (!tenant.ok()) return Refuse(route, *call.exchange, tenant.status());
    call.tenant = *tenant;
  }
  if (route.runs == Runs::kNow) return route.handler(call);
  // Intake work (the body's JSON, a chat template, the tokenizer): the
  // intake pool's, charged to the tenant.
  const std::shared_ptr<http::HttpExchange> exchange_copy = call.exchange;
  absl::Status posted = frontend_->RunOnIntake(
      *call.tenant,
      route.runs == Runs::kOnIntakeGeneration ? Frontend::Work::kGeneration
                                              : Frontend::Work::kOther,
      [&route, call = std::move(call)]() mutable { route.handler(call); });
  if (!posted.ok()) Refuse(route, *exchange_copy, posted);
}

void OpenAiService::Health(RouteCall& call) {
  const bool draining = frontend_->draining();
  call.exchange->Respond(
      draining ? 503 : 200, {{"Content-Type", kJsonType}},
      draining ? R"({"status":"draining"})" : R"({"status":"ok"})");
}

void OpenAiService::Models(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  // Beside OpenAI's fields, what load generators read from peers: vLLM's
  // max_model_len and llama.cpp's meta (paceline bench draws synthetic
  // prompt ids below meta.n_vocab). An alias is listed as a model of its
  // own, as vLLM lists each served name.
  const int64_t context = frontend_->model_config().context_length;
  auto model = [&](const std::string& id) {
    Json m = ModelJson(id, created_, "paceline");
    m["max_model_len"] = context;
    m["meta"] = {{"n_vocab", frontend_->tokenizer().vocab_size()},
                 {"n_ctx_train", context}};
    return m;
  };
  if (call.param.empty()) {
    std::vector<Json> models = {model(frontend_->model().id)};
    for (const std::string& alias : frontend_->model().aliases) {
      models.push_back(model(alias));
    }
    return RespondJson(exchange, ModelListJson(std::move(models)));
  }
  if (absl::Status st = CheckModel(*frontend_, call.param); !st.ok()) {
    return RefuseCall(call, st);
  }
  RespondJson(exchange, model(call.param));
}

void OpenAiService::Tokenize(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  absl::StatusOr<Json> body = ParseBody(call.request.body);
  if (!body.ok()) return RefuseCall(call, body.status());
  if (absl::Status st = CheckBodyModel(*body, *frontend_); !st.ok()) {
    return RefuseCall(call, st);
  }
  const Json* prompt = Find(*body, "prompt");
  if (prompt == nullptr) {
    return RefuseCall(call, InvalidParam("prompt", "'prompt' is required"));
  }
  absl::StatusOr<std::string> text = AsString(*prompt, "prompt");
  if (!text.ok()) return RefuseCall(call, text.status());
  std::optional<bool> add_special;
  if (const Json* v = Find(*body, "add_special_tokens")) {
    absl::StatusOr<bool> b = AsBool(*v, "add_special_tokens");
    if (!b.ok()) return RefuseCall(call, b.status());
    add_special = *b;
  }
  const std::vector<int32_t> ids = frontend_->TokenizeText(*text, add_special);
  RespondJson(exchange,
              TokenizeJson(ids, frontend_->model_config().context_length,
                           &frontend_->tokenizer()));
}

void OpenAiService::Detokenize(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  absl::StatusOr<Json> body = ParseBody(call.request.body);
  if (!body.ok()) return RefuseCall(call, body.status());
  if (absl::Status st = CheckBodyModel(*body, *frontend_); !st.ok()) {
    return RefuseCall(call, st);
  }
  const Json* tokens = Find(*body, "tokens");
  if (tokens == nullptr) {
    return RefuseCall(call, InvalidParam("tokens", "'tokens' is required"));
  }
  if (absl::Status st = ExpectArray(*tokens, "tokens"); !st.ok()) {
    return RefuseCall(call, st);
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    absl::StatusOr<int64_t> id = AsInt((*tokens)[i], Index("tokens", i), 0,
                                       frontend_->tokenizer().vocab_size() - 1);
    if (!id.ok()) return RefuseCall(call, id.status());
    ids.push_back(static_cast<int32_t>(*id));
  }
  absl::StatusOr<std::string> text =
      frontend_->DetokenizeIds(ids, /*skip_special=*/true);
  if (!text.ok()) return RefuseCall(call, text.status());
  RespondJson(exchange, DetokenizeJson(*text));
}

void OpenAiService::Completions(RouteCall& call) {
  Generate(call, Api::kCompletion);
}

void OpenAiService::ChatCompletions(RouteCall& call) {
  Generate(call, Api::kChat);
}

void OpenAiService::Generate(RouteCall& call, Api api) {
  absl::StatusOr<OpenAiRequest> parsed =
      api == Api::kChat ? ParseChatCompletionRequest(call.request.body)
                        : ParseCompletionRequest(call.request.body);
  if (!parsed.ok()) return RefuseCall(call, parsed.status());
  ResponseContext context;
  context.id = ResponseId(api, frontend_->NextSeed());
  context.created = absl::ToUnixSeconds(absl::Now());
  context.model = frontend_->model().id;
  context.api = api;
  context.logprobs = parsed->logprobs;
  context.include_usage = parsed->stream && parsed->include_usage;
  const int choices = static_cast<int>(parsed->prompts.size()) * parsed->n;
  auto format = std::make_unique<ChatAnswer>(std::move(context),
                                             &frontend_->tokenizer(), choices);
  StartGenerationCall(frontend_, call.tenant, *std::move(parsed),
                      std::move(format), std::move(call.exchange));
}

void OpenAiService::StoredResponse(RouteCall& call) {
  (void)frontend_->Rejected(call.tenant->name,
                            absl::NotFoundError("no stored responses"));
  RespondResponseNotStored(call.request, *call.exchange);
}

void OpenAiService::Embeddings(RouteCall& call) {
  StartEmbeddingsCall(frontend_, call.tenant, call.request,
                      std::move(call.exchange));
}

void OpenAiService::Responses(RouteCall& call) {
  StartResponsesCall(frontend_, call.tenant, call.request,
                     std::move(call.exchange));
}

}  // namespace paceline::server::openai
