#include "server/anthropic/anthropic_error.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/openai/openai_http.h"
#include "server/openai/openai_json.h"

namespace paceline::server::anthropic {
namespace {

struct Mapping {
  int http_status;
  absl::string_view type;
};

Mapping MappingFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "permission_error"};
    case absl::StatusCode::kNotFound:
      return {404, "not_found_error"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error"};
    case absl::StatusCode::kUnavailable:
      return {529, "overloaded_error"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "timeout_error"};
    default:
      return {500, "api_error"};
  }
}

}  // namespace

std::string ErrorBody(absl::string_view type, absl::string_view message) {
  openai::Json error = openai::Json::object();
  error["type"] = std::string(type);
  error["message"] = std::string(message);
  openai::Json body = openai::Json::object();
  body["type"] = "error";
  body["error"] = std::move(error);
  return openai::Dump(body);
}

ErrorResponse ToErrorResponse(const absl::Status& status) {
  if (status.ok()) {
    return {500, "api_error",
            ErrorBody("api_error", "internal error: OK status")};
  }
  const Mapping m = MappingFor(status.code());
  return {m.http_status, m.type, ErrorBody(m.type, status.message())};
}

std::string ErrorEvent(const absl::Status& status) {
  return absl::StrCat("event: error\ndata: ", ToErrorResponse(status).body,
                      "\n\n");
}

http::HttpHeaders ErrorHeaders(const absl::Status& status) {
  return openai::ErrorHeaders(status);
}

void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                  std::function<void(bool)> done) {
  ErrorResponse error = ToErrorResponse(status);
  exchange.Respond(error.http_status, ErrorHeaders(status),
                   std::move(error.body), std::move(done));
}

}  // namespace paceline::server::anthropic
