#ifndef PACELINE_SERVER_OPENAI_RESPONSES_CALL_H_
#define PACELINE_SERVER_OPENAI_RESPONSES_CALL_H_

// POST /v1/responses: OpenAI's Responses API (stateless), a generation
// call (generation_call.h) in the Responses answer format
// (responses_answer.h) over the request responses_request.h parses.
//
// Nothing is stored, so the routes that read a stored response
// (GET /v1/responses/{id}, DELETE /v1/responses/{id},
// GET /v1/responses/{id}/input_items, POST /v1/responses/{id}/cancel)
// answer 404, saying the API is stateless and to resend the conversation
// as `input`.

#include <memory>

#include "server/frontend/frontend.h"
#include "server/http/http_server.h"

namespace paceline::server::openai {

// Parses `request`'s body and answers `exchange`, now (a refusal) or as
// the generation goes. `frontend` must outlive the call.
void StartResponsesCall(Frontend* frontend, const TenantPolicy* tenant,
                        const http::HttpRequest& request,
                        std::shared_ptr<http::HttpExchange> exchange);

// Any route on a stored response: 404 in OpenAI's error shape.
void RespondResponseNotStored(const http::HttpRequest& request,
                              http::HttpExchange& exchange);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_RESPONSES_CALL_H_
