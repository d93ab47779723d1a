#ifndef PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_

// The OpenAI-compatible HTTP API, an adapter of the frontend core
// (server/frontend/frontend.h): its route table, and the answers that need
// no generation. Generation (completions, chat) is an OpenAiCall
// (openai_call.h).
//
//   GET  /health               200 {"status":"ok"}; 503 while draining. No key.
//   GET  /v1/models            the served model (with max_model_len and
//                              meta {n_vocab, n_ctx_train}, as vLLM and
//                              llama.cpp add)
//   GET  /v1/models/{id}       it, or 404 model_not_found
//   POST /v1/completions       text_completion (stream: SSE)
//   POST /v1/chat/completions  chat.completion (stream: SSE)
//   POST /tokenize             {prompt, add_special_tokens} -> tokens
//   POST /detokenize           {tokens} -> prompt (the text)
// Everything but /health needs `Authorization: Bearer KEY` of a tenant
// (the gRPC API's keys and digests, server/frontend/auth.h). A known path with
// another method is 405 (with Allow), an unknown path 404; every error is
// OpenAI's error JSON (openai_error.h). A request naming another model is
// 404 model_not_found.
//
// Thread-safe: Handle runs on the HTTP server's threads and never blocks:
// it routes and checks the key; parsing a body, rendering a chat template
// and tokenizing run on the frontend's intake pool (intake_pool.h), which
// answers 429 with Retry-After when the tenant has too much waiting there.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/frontend/frontend.h"
#include "server/http/http_server.h"
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

 private:
  // Where a route's handler runs: on the HTTP thread (it never blocks), or
  // on the intake pool (it parses a body, renders, tokenizes), charged to
  // the tenant as generation or as other work.
  enum class Runs { kNow, kOnIntake, kOnIntakeGeneration };
  struct Route;
  // The route table (openai_service.cc).
  static const std::vector<Route>& Routes();

  // The handlers.
  void Health(RouteCall& call);
  void Models(RouteCall& call);
  void Tokenize(RouteCall& call);
  void Detokenize(RouteCall& call);
  void Completions(RouteCall& call);
  void ChatCompletions(RouteCall& call);
  void Generate(RouteCall& call, Api api);

  Frontend* const frontend_;
  const int64_t created_;  // the model's "created": when the server started
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
