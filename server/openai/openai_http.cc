#include "server/openai/openai_http.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "scheduler/retry_hint.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {

http::HttpHeaders ErrorHeaders(const absl::Status& status) {
  http::HttpHeaders headers = {{"Content-Type", kJsonType}};
  if (std::optional<absl::Duration> after = scheduler::RetryAfter(status)) {
    const int64_t ms = absl::ToInt64Milliseconds(*after);
    headers.emplace_back("retry-after-ms", absl::StrCat(ms));
    headers.emplace_back("retry-after", absl::StrCat((ms + 999) / 1000));
  } else if (status.code() == absl::StatusCode::kUnavailable) {
    headers.emplace_back("retry-after", "1");
  }
  return headers;
}

void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                  std::function<void(bool)> done) {
  ErrorResponse error = ToErrorResponse(status);
  exchange.Respond(error.http_status, ErrorHeaders(status),
                   std::move(error.body), std::move(done));
}

void RespondJson(http::HttpExchange& exchange, const Json& body,
                 std::function<void(bool)> done) {
  exchange.Respond(200, {{"Content-Type", kJsonType}}, Dump(body),
                   std::move(done));
}

std::string SseEvent(const Json& data) {
  return absl::StrCat("data: ", Dump(data), "\n\n");
}

http::HttpHeaders SseHeaders() {
  return {{"Content-Type", "text/event-stream; charset=utf-8"},
          {"Cache-Control", "no-cache"},
          {"X-Accel-Buffering", "no"}};
}

}  // namespace paceline::server::openai
