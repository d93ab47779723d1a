#ifndef PACELINE_SERVER_OPENAI_GENERATION_CALL_H_
#define PACELINE_SERVER_OPENAI_GENERATION_CALL_H_

// One generation of any HTTP API (OpenAI's completions, chat completions
// and Responses, Anthropic's Messages): its choices (n per prompt, every
// prompt of a batch) as requests of the serving loop, each
// delivered through its own StreamBuffer — the same delivery stage as a
// gRPC stream: paced, one write in flight per choice, a slow reader
// coalesces and stalls no one. This call is every buffer's StreamWriter and
// turns their messages into the answer through the API's AnswerFormat
// (answer_format.h), which writes the bytes:
//   stream: SSE on one chunked answer, opened when the first choice is
//     accepted (a refusal at intake is still a plain error answer): per
//     choice its events in order, then its finish; once every choice has
//     finished, the stream's end. A failure after the stream opened is
//     the format's error event, then the stream ends.
//   otherwise: one JSON answer once every choice has finished (unpaced:
//     the whole answer goes out at once, as gRPC's Complete). Held whole
//     until then, so bounded: a request whose estimate passes
//     max_response_bytes is refused before it is submitted, and an answer
//     that grows past it anyway fails (400) and cancels its choices
//     (server/frontend/answer_size.h).
// A reader too slow for the stream: max_unread_bytes counts every
// choice's released, unwritten output together (one call, one budget).
// The client going away (the exchange's on_close) cancels every choice
// within one engine step and cuts its delivery. Choice ids stay registered
// with the frontend until the answer's last byte is written, so a drain
// waits for HTTP streams like gRPC ones.
//
// Threads: Send comes from the pacer thread (or from a write's
// completion, on the connection's strand); the engine thread never calls
// in. State is under one mutex; buffers and the exchange are called
// outside it.

#include <memory>

#include "server/frontend/frontend.h"
#include "server/http/http_server.h"
#include "server/openai/answer_format.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// Admits every choice of `request` for `tenant`, submits them and answers
// `exchange` in `format`, now (a refusal) or as they finish. `frontend`
// must outlive the call (the daemon stops the HTTP server before it).
void StartGenerationCall(Frontend* frontend, const TenantPolicy* tenant,
                         OpenAiRequest request,
                         std::unique_ptr<AnswerFormat> format,
                         std::shared_ptr<http::HttpExchange> exchange);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_GENERATION_CALL_H_
