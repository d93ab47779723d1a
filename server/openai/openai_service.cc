#include "server/openai/openai_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/router.h"
#include "server/openai/openai_call.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"

namespace paceline::server::openai {

struct OpenAiService::Route {
  http::RoutePattern pattern;
  bool needs_key;
  Runs runs;
  void (OpenAiService::*handler)(RouteCall&);
};

const std::vector<OpenAiService::Route>& OpenAiService::Routes() {
  static const auto* const routes = new std::vector<Route>{
      {{"GET", "/health"}, false, Runs::kNow, &OpenAiService::Health},
      {{"GET", "/v1/models"}, true, Runs::kNow, &OpenAiService::Models},
      {{"GET", "/v1/models/{id}"}, true, Runs::kNow, &OpenAiService::Models},
      {{"POST", "/v1/completions"},
       true,
       Runs::kOnIntakeGeneration,
       &OpenAiService::Completions},
      {{"POST", "/v1/chat/completions"},
       true,
       Runs::kOnIntakeGeneration,
       &OpenAiService::ChatCompletions},
      {{"POST", "/tokenize"}, true, Runs::kOnIntake, &OpenAiService::Tokenize},
      {{"POST", "/detokenize"},
       true,
       Runs::kOnIntake,
       &OpenAiService::Detokenize},
  };
  return *routes;
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
    : frontend_(frontend), created_(absl::ToUnixSeconds(absl::Now())) {}

std::pair<std::string, std::string> OpenAiService::ErrorBody(
    int status, absl::string_view message) {
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return {openai::ErrorBody(message, type, std::nullopt, std::nullopt),
          kJsonType};
}

void OpenAiService::Handle(http::HttpRequest request,
                           std::shared_ptr<http::HttpExchange> exchange) {
  const std::vector<Route>& routes = Routes();
  // The table's patterns, for MatchRoute: made once.
  static const auto* const patterns = [&routes] {
    auto* out = new std::vector<http::RoutePattern>;
    for (const Route& r : routes) out->push_back(r.pattern);
    return out;
  }();
  http::RouteMatch match =
      http::MatchRoute(*patterns, request.method, request.path);
  if (match.route < 0 && match.allowed.empty()) {
    return RespondError(
        *exchange,
        WithErrorCode(absl::NotFoundError(absl::StrCat(
                          "no route ", request.method, " ", request.path)),
                      "unknown_route"));
  }
  if (match.route < 0) {
    ErrorResponse error =
        ToErrorResponse(absl::InvalidArgumentError(absl::StrCat(
            request.path, " takes ", match.allowed, ", not ", request.method)));
    return exchange->Respond(
        405, {{"Content-Type", kJsonType}, {"Allow", match.allowed}},
        std::move(error.body));
  }
  const Route& route = routes[match.route];
  RouteCall call{nullptr, std::move(request), std::move(match.param),
                 std::move(exchange)};
  if (route.needs_key) {
    absl::StatusOr<const TenantPolicy*> tenant = frontend_->Authenticate(
        absl::string_view(call.request.Header("authorization")));
    if (!tenant.ok()) return RespondError(*call.exchange, tenant.status());
    call.tenant = *tenant;
  }
  if (route.runs == Runs::kNow) return (this->*route.handler)(call);
  // Intake work (the body's JSON, a chat template, the tokenizer): the
  // intake pool's, charged to the tenant.
  const std::shared_ptr<http::HttpExchange> exchange_copy = call.exchange;
  absl::Status posted = frontend_->RunOnIntake(
      *call.tenant,
      route.runs == Runs::kOnIntakeGeneration ? Frontend::Work::kGeneration
                                              : Frontend::Work::kOther,
      [this, handler = route.handler, call = std::move(call)]() mutable {
        (this->*handler)(call);
      });
  if (!posted.ok()) RespondError(*exchange_copy, posted);
}

void OpenAiService::Health(RouteCall& call) {
  const bool draining = frontend_->draining();
  call.exchange->Respond(
      draining ? 503 : 200, {{"Content-Type", kJsonType}},
      draining ? R"({"status":"draining"})" : R"({"status":"ok"})");
}

void OpenAiService::Models(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  const std::string& served = frontend_->model().id;
  Json model = ModelJson(served, created_, "paceline");
  // Beside OpenAI's fields, what load generators read from peers: vLLM's
  // max_model_len and llama.cpp's meta (paceline bench draws synthetic
  // prompt ids below meta.n_vocab).
  const int64_t context = frontend_->model_config().context_length;
  model["max_model_len"] = context;
  model["meta"] = {{"n_vocab", frontend_->tokenizer().vocab_size()},
                   {"n_ctx_train", context}};
  if (call.param.empty()) {
    return RespondJson(exchange, ModelListJson({model}));
  }
  if (absl::Status st = CheckModel(*frontend_, call.param); !st.ok()) {
    return RespondError(exchange, st);
  }
  RespondJson(exchange, model);
}

void OpenAiService::Tokenize(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  absl::StatusOr<Json> body = ParseBody(call.request.body);
  if (!body.ok()) return RespondError(exchange, body.status());
  if (absl::Status st = CheckBodyModel(*body, *frontend_); !st.ok()) {
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
  const std::vector<int32_t> ids = frontend_->TokenizeText(*text, add_special);
  RespondJson(exchange,
              TokenizeJson(ids, frontend_->model_config().context_length,
                           &frontend_->tokenizer()));
}

void OpenAiService::Detokenize(RouteCall& call) {
  http::HttpExchange& exchange = *call.exchange;
  absl::StatusOr<Json> body = ParseBody(call.request.body);
  if (!body.ok()) return RespondError(exchange, body.status());
  if (absl::Status st = CheckBodyModel(*body, *frontend_); !st.ok()) {
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
                                       frontend_->tokenizer().vocab_size() - 1);
    if (!id.ok()) return RespondError(exchange, id.status());
    ids.push_back(static_cast<int32_t>(*id));
  }
  absl::StatusOr<std::string> text =
      frontend_->DetokenizeIds(ids, /*skip_special=*/true);
  if (!text.ok()) return RespondError(exchange, text.status());
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
  if (!parsed.ok()) return RespondError(*call.exchange, parsed.status());
  StartCompletionCall(frontend_, call.tenant, api, *std::move(parsed),
                      std::move(call.exchange));
}

}  // namespace paceline::server::openai
