#ifndef PACELINE_SERVER_OPENAI_OPENAI_CALL_H_
#define PACELINE_SERVER_OPENAI_OPENAI_CALL_H_

// One POST /v1/completions or /v1/chat/completions: its choices (n per
// prompt, every prompt of a batch) as requests of the serving loop, each
// delivered through its own StreamBuffer — the same delivery stage as a
// gRPC stream: paced, one write in flight per choice, a slow reader
// coalesces and stalls no one. This call is every buffer's StreamWriter and
// turns their messages into the answer:
//   stream: SSE on one chunked answer, opened when the first choice is
//     accepted (a refusal at intake is still a plain error answer): per
//     choice its chunks in order, then its finish chunk; once every choice
//     has finished, the usage chunk (stream_options.include_usage) and
//     "data: [DONE]". A failure after the stream opened is one
//     `data: {"error": ...}` event, then the stream ends.
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

#include "server/http/http_server.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"
#include "server/frontend/frontend.h"

namespace paceline::server::openai {

// Admits every choice of `request` for `tenant`, submits them and answers
// `exchange`, now (a refusal) or as they finish. `frontend` must outlive
// the call (the daemon stops the HTTP server before it).
void StartCompletionCall(Frontend* frontend, const TenantPolicy* tenant,
                         Api api, OpenAiRequest request,
                         std::shared_ptr<http::HttpExchange> exchange);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_CALL_H_
