#ifndef PACELINE_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_
#define PACELINE_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_

// Anthropic's error shape, and the mapping from absl::Status to it.
//
// Every error answer of the Messages API is
//   {"type": "error", "error": {"type": str, "message": str}}
// and a stream that fails after it opened ends with the same object as an
// `event: error` server-sent event. Facts from Anthropic's API reference
// ("Errors": the HTTP status of each error type) and its TypeScript client
// (anthropics/anthropic-sdk-typescript: src/resources/shared.ts
// `ErrorResponse`, `ErrorType`; src/core/error.ts picks the error class
// from the HTTP status alone, 400 -> BadRequestError, 401 ->
// AuthenticationError, 429 -> RateLimitError, >= 500 ->
// InternalServerError; src/client.ts retries 408, 409, 429 and >= 500,
// waiting `retry-after-ms` or `retry-after` when sent; src/core/
// streaming.ts throws an APIError for an `error` event).
//
// Status code -> HTTP status, error type:
//   INVALID_ARGUMENT     400 invalid_request_error
//   FAILED_PRECONDITION  400 invalid_request_error  (e.g. no chat template)
//   OUT_OF_RANGE         400 invalid_request_error
//   UNAUTHENTICATED      401 authentication_error
//   PERMISSION_DENIED    403 permission_error
//   NOT_FOUND            404 not_found_error        (a model not served)
//   RESOURCE_EXHAUSTED   429 rate_limit_error       (waiting helps; the
//                                                     status's retry hint
//                                                     becomes retry-after)
//   UNAVAILABLE          529 overloaded_error       (draining, shutting
//                                                     down: Anthropic's
//                                                     "temporarily
//                                                     overloaded"; retried)
//   DEADLINE_EXCEEDED    504 timeout_error
//   anything else        500 api_error              (a bug)

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http/http_server.h"

namespace paceline::server::anthropic {

struct ErrorResponse {
  int http_status = 500;
  absl::string_view type;  // "invalid_request_error", ...
  std::string body;        // {"type": "error", "error": {...}}, serialized
};

// The body for an error of `type`; invalid UTF-8 in `message` is replaced
// with U+FFFD.
std::string ErrorBody(absl::string_view type, absl::string_view message);

// The answer for a non-OK `status`, by the table above. An OK status is a
// caller bug; it maps to 500 api_error "internal error: OK status".
ErrorResponse ToErrorResponse(const absl::Status& status);

// The same as one server-sent event: "event: error\ndata: BODY\n\n".
std::string ErrorEvent(const absl::Status& status);

// The headers of an error answer: the content type, and for a status with
// a retry hint `retry-after-ms` and `retry-after` (openai_http.h's
// ErrorHeaders: the same clients' rules).
http::HttpHeaders ErrorHeaders(const absl::Status& status);

// Answers `exchange` with `status` in Anthropic's shape.
void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                  std::function<void(bool)> done = {});

}  // namespace paceline::server::anthropic

#endif  // PACELINE_SERVER_ANTHROPIC_ANTHROPIC_ERROR_H_
