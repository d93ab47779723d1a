#ifndef PACELINE_SERVER_OPENAI_OPENAI_HTTP_H_
#define PACELINE_SERVER_OPENAI_OPENAI_HTTP_H_

// The OpenAI API's HTTP framing, shared by the service and its calls: JSON
// answers, error answers (with the retry headers OpenAI's clients honour),
// and server-sent events.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "server/http/http_server.h"
#include "server/openai/openai_json.h"

namespace paceline::server::openai {

// Content-Type of JSON answers.
inline constexpr char kJsonType[] = "application/json";

// The headers of an error answer for `status`: the content type, and for a
// status with a retry hint (scheduler/retry_hint.h) `retry-after-ms` and
// `retry-after` (whole seconds, rounded up), which the official clients
// read before retrying a 429.
http::HttpHeaders ErrorHeaders(const absl::Status& status);

// Answers `exchange` with `status` as OpenAI's error JSON (openai_error.h).
void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                  std::function<void(bool)> done = {});

// Answers with 200 and `body` serialized.
void RespondJson(http::HttpExchange& exchange, const Json& body,
                 std::function<void(bool)> done = {});

// One server-sent event: "data: " + the JSON + "\n\n" (JSON text has no
// newline, so one data line carries it).
std::string SseEvent(const Json& data);
// The stream's last event: "data: [DONE]\n\n".
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// The headers of an SSE answer.
http::HttpHeaders SseHeaders();

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_HTTP_H_
