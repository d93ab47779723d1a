#include "server/http/cors.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"

namespace paceline::server::http {
namespace {

constexpr char kExposed[] = "retry-after, retry-after-ms";

// An answer's headers plus the CORS ones for `allow_origin`.
HttpHeaders WithAllowOrigin(HttpHeaders headers,
                            const std::string& allow_origin) {
  headers.emplace_back("Access-Control-Allow-Origin", allow_origin);
  headers.emplace_back("Vary", "Origin");
  headers.emplace_back("Access-Control-Expose-Headers", kExposed);
  return headers;
}

// Forwards to `inner`, adding the CORS headers to the answer.
class CorsExchange final : public HttpExchange {
 public:
  CorsExchange(std::shared_ptr<HttpExchange> inner, std::string allow_origin)
      : inner_(std::move(inner)), allow_origin_(std::move(allow_origin)) {}

  void Respond(int status, HttpHeaders headers, std::string body,
               std::function<void(bool ok)> done) override {
    inner_->Respond(status, WithAllowOrigin(std::move(headers), allow_origin_),
                    std::move(body), std::move(done));
  }
  void StartStream(int status, HttpHeaders headers) override {
    inner_->StartStream(status,
                        WithAllowOrigin(std::move(headers), allow_origin_));
  }
  void Write(std::string data, std::function<void(bool ok)> done) override {
    inner_->Write(std::move(data), std::move(done));
  }
  void EndStream(std::function<void(bool ok)> done) override {
    inner_->EndStream(std::move(done));
  }
  void SetOnClose(std::function<void()> on_close) override {
    inner_->SetOnClose(std::move(on_close));
  }

 private:
  const std::shared_ptr<HttpExchange> inner_;
  const std::string allow_origin_;
};

// What Access-Control-Allow-Origin says to `origin`; "" when not allowed.
std::string AllowOrigin(const CorsOptions& options, absl::string_view origin) {
  if (origin.empty()) return "";
  for (const std::string& allowed : options.allowed_origins) {
    if (allowed == "*") return "*";
    if (absl::EqualsIgnoreCase(allowed, origin)) return std::string(origin);
  }
  return "";
}

void Preflight(const HttpRequest& request, const std::string& allow_origin,
               HttpExchange& exchange) {
  if (allow_origin.empty()) {
    exchange.Respond(403, {{"Content-Type", "text/plain; charset=utf-8"}},
                     "cross-origin requests from this origin are not "
                     "allowed (http.cors_origins)\n");
    return;
  }
  std::string headers(request.Header("access-control-request-headers"));
  if (headers.empty()) headers = "authorization, content-type, x-api-key";
  exchange.Respond(204,
                   {{"Access-Control-Allow-Origin", allow_origin},
                    {"Vary", "Origin"},
                    {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                    {"Access-Control-Allow-Headers", headers},
                    {"Access-Control-Max-Age", "600"}},
                   "");
}

}  // namespace

HttpHandler WithCors(CorsOptions options, HttpHandler handler) {
  if (options.allowed_origins.empty()) return handler;
  return [options = std::move(options), handler = std::move(handler)](
             HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    const std::string allow = AllowOrigin(options, request.Header("origin"));
    const bool preflight =
        request.method == "OPTIONS" && !request.Header("origin").empty() &&
        !request.Header("access-control-request-method").empty();
    if (preflight) return Preflight(request, allow, *exchange);
    if (allow.empty()) return handler(std::move(request), std::move(exchange));
    handler(std::move(request),
            std::make_shared<CorsExchange>(std::move(exchange), allow));
  };
}

}  // namespace paceline::server::http
