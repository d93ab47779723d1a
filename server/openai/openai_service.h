#ifndef PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_

// The HTTP APIs' one route table, and OpenAI's API over the frontend core
// (server/frontend/frontend.h): its routes, and the answers that need no
// generation. Generation is a generation call (generation_call.h) in the
// API's answer format (chat_answer.h, responses_call.h). Other APIs
// (Anthropic's Messages, server/anthropic) add their routes with AddRoutes;
// each route answers its refusals in its API's error shape.
//
//   GET  /health               200 {"status":"ok"}; 503 while draining. No key.
//   GET  /v1/models            the served model (with max_model_len and
//                              meta {n_vocab, n_ctx_train}, as vLLM and
//                              llama.cpp add)
//   GET  /v1/models/{id}       it, or 404 model_not_found
//   POST /v1/completions       text_completion (stream: SSE)
//   POST /v1/chat/completions  chat.completion (stream: SSE)
//   POST /v1/responses         response (stream: typed SSE events)
//   POST /v1/embeddings        list of embeddings (embeddings_call.h)
//   GET|POST|DELETE /v1/responses/{id}[/...]  404: nothing is stored
//   POST /tokenize             {prompt, add_special_tokens} -> tokens
//   POST /detokenize           {tokens} -> prompt (the text)
// Everything but /health needs `Authorization: Bearer KEY` of a tenant
// (the gRPC API's keys and digests, server/frontend/auth.h); a route that
// takes `x-api-key: KEY` (Anthropic's) takes either. A known path with
// another method is 405 (with Allow), an unknown path 404; every error is
// OpenAI's error JSON (openai_error.h). A request naming another model is
// 404 model_not_found.
//
// Thread-safe: Handle runs on the HTTP server's threads and never blocks:
// it routes and checks the key; parsing a body, rendering a chat template
// and tokenizing run on the frontend's intake pool (intake_pool.h), which
// answers 429 with Retry-After when the tenant has too much waiting there.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/frontend/frontend.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/openai/openai_response.h"

namespace paceline::server::openai {

class OpenAiService {
 public:
  // `frontend` must outlive this and every call it starts.
  explicit OpenAiService(Frontend* frontend);

  void Handle(http::HttpRequest request,
              std::shared_ptr<http::HttpExchange> exchange);

  // The body of the HTTP server's own refusals (HttpServerOptions::
  // error_body): OpenAI's error JSON and its content type.
  static std::pair<std::string, std::string> ErrorBody(
      int status, absl::string_view message);

  // One routed request, as its handler gets it.
  struct RouteCall {
    const TenantPolicy* tenant = nullptr;  // null for a route without key
    http::HttpRequest request;
    std::string param;  // what the route's {name} matched
    std::shared_ptr<http::HttpExchange> exchange;
  };

  // Where a route's handler runs: on the HTTP thread (it never blocks), or
  // on the intake pool (it parses a body, renders, tokenizes), charged to
  // the tenant as generation or as other work.
  enum class Runs { kNow, kOnIntake, kOnIntakeGeneration };
  // Answers a refusal (no key, a full intake queue) in the API's shape.
  using ErrorResponder =
      std::function<void(http::HttpExchange&, const absl::Status&)>;

  struct ApiRoute {
    http::RoutePattern pattern;
    bool needs_key = true;
    bool takes_x_api_key = false;  // `x-api-key: KEY` besides Bearer
    Runs runs = Runs::kNow;
    std::function<void(RouteCall&)> handler;
    ErrorResponder respond_error;  // null: OpenAI's shape
  };

  // Serves `routes` beside OpenAI's (a pattern may not repeat one). Call
  // before the HTTP server starts.
  void AddRoutes(std::vector<ApiRoute> routes);

 private:
  // OpenAI's routes.
  std::vector<ApiRoute> OpenAiRoutes();

  // The handlers.
  void Health(RouteCall& call);
  void Models(RouteCall& call);
  void Tokenize(RouteCall& call);
  void Detokenize(RouteCall& call);
  void Completions(RouteCall& call);
  void ChatCompletions(RouteCall& call);
  void Responses(RouteCall& call);
  void Embeddings(RouteCall& call);  // embeddings_call.h
  void StoredResponse(RouteCall& call);
  void Generate(RouteCall& call, Api api);
  // Answers a refusal of the call's own making (OpenAI's shape), counted
  // as a rejection (Frontend::Rejected).
  void RefuseCall(RouteCall& call, const absl::Status& status);
  // Answers `status` in `route`'s error shape.
  static void Refuse(const ApiRoute& route, http::HttpExchange& exchange,
                     const absl::Status& status);

  Frontend* const frontend_;
  const int64_t created_;  // the model's "created": when the server started
  // The table, and its patterns for MatchRoute; constant while serving.
  std::vector<ApiRoute> routes_;
  std::vector<http::RoutePattern> patterns_;
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
