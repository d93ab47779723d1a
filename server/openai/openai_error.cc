#include "server/openai/openai_error.h"

#include <utility>

#include "absl/strings/cord.h"
#include "nlohmann/json.hpp"
#include "scheduler/context_limit.h"

namespace paceline::server::openai {
namespace {

using Json = nlohmann::ordered_json;

// Payload type URLs: private to this file, so no other module parses them.
constexpr absl::string_view kParamUrl = "paceline.openai/param";
constexpr absl::string_view kCodeUrl = "paceline.openai/code";

std::optional<std::string> Payload(const absl::Status& status,
                                   absl::string_view url) {
  auto payload = status.GetPayload(url);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

struct Mapping {
  int http_status;
  const char* type;
  const char* code;  // null: JSON null
};

Mapping MappingFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error", nullptr};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error", "invalid_api_key"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "permission_error", nullptr};
    case absl::StatusCode::kNotFound:
      return {404, "invalid_request_error", nullptr};
    case absl::StatusCode::kResourceExhausted:
      return {429, "requests", "rate_limit_exceeded"};
    case absl::StatusCode::kUnavailable:
      return {503, "server_error", nullptr};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "server_error", nullptr};
    default:
      return {500, "server_error", nullptr};
  }
}

Json NullOr(const std::optional<std::string>& s) {
  return s.has_value() ? Json(*s) : Json(nullptr);
}

}  // namespace

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kParamUrl, absl::Cord(param));
  return status;
}

std::optional<std::string> ParamOf(const absl::Status& status) {
  return Payload(status, kParamUrl);
}

absl::Status WithErrorCode(absl::Status status, absl::string_view code) {
  if (!status.ok()) status.SetPayload(kCodeUrl, absl::Cord(code));
  return status;
}

absl::Status FromCore(absl::Status status) {
  if (!absl::IsNotFound(status)) return status;
  return WithErrorCode(std::move(status), "model_not_found");
}

std::optional<std::string> ErrorCodeOf(const absl::Status& status) {
  return Payload(status, kCodeUrl);
}

std::string ErrorBody(absl::string_view message, absl::string_view type,
                      const std::optional<std::string>& param,
                      const std::optional<std::string>& code) {
  Json error = Json::object();
  error["message"] = std::string(message);
  error["type"] = std::string(type);
  error["param"] = NullOr(param);
  error["code"] = NullOr(code);
  Json body = Json::object();
  body["error"] = std::move(error);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

ErrorResponse ToErrorResponse(const absl::Status& status) {
  if (status.ok()) {
    return {500, ErrorBody("internal error: OK status", "server_error",
                           std::nullopt, std::nullopt)};
  }
  const Mapping m = MappingFor(status.code());
  std::optional<std::string> code = ErrorCodeOf(status);
  // OpenAI's code for a prompt over the context window.
  if (!code.has_value() && scheduler::IsContextExceeded(status)) {
    code = "context_length_exceeded";
  }
  if (!code.has_value() && m.code != nullptr) code = m.code;
  return {m.http_status,
          ErrorBody(status.message(), m.type, ParamOf(status), code)};
}

}  // namespace paceline::server::openai
