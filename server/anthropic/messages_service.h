#ifndef PACELINE_SERVER_ANTHROPIC_MESSAGES_SERVICE_H_
#define PACELINE_SERVER_ANTHROPIC_MESSAGES_SERVICE_H_

// Anthropic's Messages API, an adapter of the frontend core served beside
// the OpenAI-compatible routes (server/openai/openai_service.h routes,
// authenticates and runs them):
//
//   POST /v1/messages               a Message (stream: Anthropic's SSE
//                                   events), messages_answer.h
//   POST /v1/messages/count_tokens  {input_tokens}: the rendered prompt's
//                                   tokens (the chat template's output,
//                                   tools included)
//
// Both need a tenant's key as `x-api-key: KEY` (Anthropic's clients'
// apiKey) or `Authorization: Bearer KEY` (their authToken). Every error,
// the key's and the intake queue's included, is Anthropic's error JSON
// with its HTTP status (anthropic_error.h). Bodies are parsed, rendered
// and tokenized on the intake pool; generation is the shared generation
// call (server/openai/generation_call.h).
//
// count_tokens builds the request as a generation would be built (the
// model checked, the template rendered, the tenant's prompt limit
// applied), so a prompt the tenant may not send is refused there too.

#include <vector>

#include "server/frontend/frontend.h"
#include "server/openai/openai_service.h"

namespace paceline::server::anthropic {

// The routes; `frontend` must outlive every call they start.
std::vector<openai::OpenAiService::ApiRoute> MessagesRoutes(Frontend* frontend);

}  // namespace paceline::server::anthropic

#endif  // PACELINE_SERVER_ANTHROPIC_MESSAGES_SERVICE_H_
