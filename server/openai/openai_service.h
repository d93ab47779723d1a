#ifndef PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_

// The OpenAI-compatible HTTP API: routes, auth, and the answers that need
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
// and tokenizing run on the service's intake pool (intake_pool.h), which
// answers 429 with Retry-After when the tenant has too much waiting there.

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "server/http/http_server.h"
#include "server/grpc/grpc_service.h"

namespace paceline::server::openai {

class OpenAiService {
 public:
  // `service` must outlive this and every call it starts.
  explicit OpenAiService(PacelineService* service);

  void Handle(http::HttpRequest request,
              std::shared_ptr<http::HttpExchange> exchange);

  // The body of the HTTP server's own refusals (HttpServerOptions::
  // error_body): OpenAI's error JSON and its content type.
  static std::pair<std::string, std::string> ErrorBody(
      int status, absl::string_view message);

 private:
  // On the intake pool: the routes that parse a body.
  void Work(const TenantPolicy* tenant, const http::HttpRequest& request,
            std::shared_ptr<http::HttpExchange> exchange);
  void Health(http::HttpExchange& exchange) const;
  void Models(absl::string_view id, http::HttpExchange& exchange) const;
  void Tokenize(const http::HttpRequest& request,
                http::HttpExchange& exchange) const;
  void Detokenize(const http::HttpRequest& request,
                  http::HttpExchange& exchange) const;
  void Generate(const TenantPolicy* tenant, const http::HttpRequest& request,
                std::shared_ptr<http::HttpExchange> exchange);

  PacelineService* const service_;
  const int64_t created_;  // the model's "created": when the server started
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_SERVICE_H_
