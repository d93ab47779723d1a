#ifndef PACELINE_SERVER_OPENAI_EMBEDDINGS_CALL_H_
#define PACELINE_SERVER_OPENAI_EMBEDDINGS_CALL_H_

// POST /v1/embeddings over the frontend core: the body parsed
// (embeddings_request.h), texts tokenized with the model's BOS rule (as
// llama.cpp's server tokenizes embedding inputs), the inputs embedded by
// Frontend::Embed (prefill-only requests through the scheduler), and the
// CreateEmbeddingResponse answered. A model without a pooling type is a
// 400 saying it is a generation model.
//
// Runs on the intake pool (the route's Runs::kOnIntakeGeneration); the
// answer is written from the intake pool too, once the last input's
// request has finished.

#include <memory>

#include "server/frontend/frontend.h"
#include "server/http/http_server.h"

namespace paceline::server::openai {

void StartEmbeddingsCall(Frontend* frontend, const TenantPolicy* tenant,
                         const http::HttpRequest& request,
                         std::shared_ptr<http::HttpExchange> exchange);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_EMBEDDINGS_CALL_H_
