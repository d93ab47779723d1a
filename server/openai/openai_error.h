#ifndef PACELINE_SERVER_OPENAI_OPENAI_ERROR_H_
#define PACELINE_SERVER_OPENAI_OPENAI_ERROR_H_

// OpenAI's error shape, and the mapping from absl::Status to it.
//
// Every error response of the OpenAI-compatible API is
//   {"error": {"message": str, "type": str, "param": str|null,
//              "code": str|null}}
// (the shape the official clients parse: openai-node's `APIError` reads
// `error.message/type/param/code`, and picks its error class from the HTTP
// status alone, e.g. 429 -> RateLimitError, which honours `retry-after-ms`
// and `retry-after` headers; the server adds those headers, not this file).
//
// A parse error names the request field at fault as OpenAI's `param`
// ("temperature", "messages[2].content", "stop[1]"). It travels inside the
// absl::Status as a payload (InvalidParam / ParamOf), so the status stays
// the one type that crosses module boundaries.
//
// Status code -> HTTP status, type, code:
//   INVALID_ARGUMENT     400 invalid_request_error  (param from the payload;
//                                                     code
//                                                     context_length_exceeded
//                                                     for a prompt over the
//                                                     context window,
//                                                     scheduler/context_limit.h)
//   FAILED_PRECONDITION  400 invalid_request_error  (e.g. chat on a model
//                                                     without a template)
//   OUT_OF_RANGE         400 invalid_request_error
//   UNAUTHENTICATED      401 authentication_error   code invalid_api_key
//   PERMISSION_DENIED    403 permission_error
//   NOT_FOUND            404 invalid_request_error  (code from the payload,
//                                                     e.g. model_not_found)
//   RESOURCE_EXHAUSTED   429 requests               code rate_limit_exceeded
//                        (a tenant limit or a full queue: waiting helps. A
//                        request that can never fit, over a tenant's prompt
//                        or max_tokens limit, is INVALID_ARGUMENT upstream,
//                        so it is a 400 and the client does not retry it.)
//   UNAVAILABLE          503 server_error           (draining, overloaded)
//   DEADLINE_EXCEEDED    504 server_error
//   anything else        500 server_error           (a bug)
// OpenAI's own 429 bodies carry type "requests"/"tokens" and code
// "rate_limit_exceeded"; its 401 carries code "invalid_api_key".

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace paceline::server::openai {

// InvalidArgument(message), carrying `param` for the error's `param` field.
absl::Status InvalidParam(absl::string_view param, absl::string_view message);

// The param an InvalidParam status carries; nullopt when none.
std::optional<std::string> ParamOf(const absl::Status& status);

// `status` with OpenAI's `code` set (e.g. "model_not_found"), overriding
// the code the mapping would pick. OK statuses are returned unchanged.
absl::Status WithErrorCode(absl::Status status, absl::string_view code);

// A refusal of the frontend core as OpenAI names it: NOT_FOUND (the core's
// model-name check, the only one it makes) gets "model_not_found".
absl::Status FromCore(absl::Status status);

// The code WithErrorCode set; nullopt when none.
std::optional<std::string> ErrorCodeOf(const absl::Status& status);

struct ErrorResponse {
  int http_status = 500;
  std::string body;  // the JSON object, serialized
};

// The body {"error": {...}}; null param/code are written as JSON null.
// Invalid UTF-8 in the strings is replaced with U+FFFD.
std::string ErrorBody(absl::string_view message, absl::string_view type,
                      const std::optional<std::string>& param,
                      const std::optional<std::string>& code);

// The response for a non-OK `status`, by the table above. An OK status is
// a caller bug; it maps to 500 "internal error: OK status".
ErrorResponse ToErrorResponse(const absl::Status& status);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_ERROR_H_
