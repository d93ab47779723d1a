// absl::Status -> Anthropic's error answers (server/anthropic/
// anthropic_error.h): the HTTP status and error type per code, the body's
// shape, the retry headers Anthropic's clients honour, the SSE error event.
#include "server/anthropic/anthropic_error.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/retry_hint.h"

namespace paceline::server::anthropic {
namespace {

using Json = nlohmann::ordered_json;

std::string Header(const http::HttpHeaders& headers, absl::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(AnthropicError, StatusAndTypePerCode) {
  const std::vector<std::pair<absl::Status, std::pair<int, std::string>>>
      cases = {
          {absl::InvalidArgumentError("x"), {400, "invalid_request_error"}},
          {absl::FailedPreconditionError("x"), {400, "invalid_request_error"}},
          {absl::OutOfRangeError("x"), {400, "invalid_request_error"}},
          {absl::UnauthenticatedError("x"), {401, "authentication_error"}},
          {absl::PermissionDeniedError("x"), {403, "permission_error"}},
          {absl::NotFoundError("x"), {404, "not_found_error"}},
          {absl::ResourceExhaustedError("x"), {429, "rate_limit_error"}},
          {absl::UnavailableError("x"), {529, "overloaded_error"}},
          {absl::DeadlineExceededError("x"), {504, "timeout_error"}},
          {absl::InternalError("x"), {500, "api_error"}},
          {absl::CancelledError("x"), {500, "api_error"}},
          {absl::OkStatus(), {500, "api_error"}},
      };
  for (const auto& [status, expected] : cases) {
    const ErrorResponse e = ToErrorResponse(status);
    EXPECT_EQ(e.http_status, expected.first) << status;
    EXPECT_EQ(e.type, expected.second) << status;
    const Json body = Json::parse(e.body);
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], expected.second);
    EXPECT_TRUE(body["error"]["message"].is_string());
  }
}

TEST(AnthropicError, Body) {
  EXPECT_EQ(Json::parse(ToErrorResponse(absl::InvalidArgumentError(
                                            "'max_tokens' is required"))
                            .body),
            Json::parse(R"({"type": "error", "error": {
                "type": "invalid_request_error",
                "message": "'max_tokens' is required"}})"));
  // Invalid UTF-8 in a message never breaks the JSON.
  const Json body = Json::parse(ErrorBody("api_error", "bad \xFF byte"));
  EXPECT_EQ(body["error"]["message"], "bad \xEF\xBF\xBD byte");
}

TEST(AnthropicError, RetryHeaders) {
  const http::HttpHeaders limited = ErrorHeaders(
      scheduler::ResourceExhaustedWithRetry("busy", absl::Milliseconds(1500)));
  EXPECT_EQ(Header(limited, "Content-Type"), "application/json");
  EXPECT_EQ(Header(limited, "retry-after-ms"), "1500");
  EXPECT_EQ(Header(limited, "retry-after"), "2");
  EXPECT_EQ(
      Header(ErrorHeaders(absl::UnavailableError("draining")), "retry-after"),
      "1");
  EXPECT_EQ(
      Header(ErrorHeaders(absl::InvalidArgumentError("x")), "retry-after"), "");
}

TEST(AnthropicError, Event) {
  EXPECT_EQ(ErrorEvent(absl::InternalError("boom")),
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
            "\"api_error\",\"message\":\"boom\"}}\n\n");
}

}  // namespace
}  // namespace paceline::server::anthropic
