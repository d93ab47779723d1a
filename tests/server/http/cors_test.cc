// WithCors (server/http/cors.h) on a real HttpServer, called with curl as a
// browser would: preflights (OPTIONS with Origin and
// Access-Control-Request-Method) and plain requests, whole and streamed
// answers, from allowed and other origins. The handler records what reaches
// it, so a test can tell a preflight answered by the wrapper from one the
// handler saw. Every wait is curl's own (--max-time).

#include "server/http/cors.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/http/http_server.h"
#include "tests/testing/run_command.h"

namespace paceline::server::http {
namespace {

using ::paceline::testing::CommandResult;
using ::paceline::testing::RunCommand;

constexpr char kCurl[] = "/usr/bin/curl";
constexpr char kApp[] = "https://app.example.com";

// The status and headers (lower-cased names) curl -i printed, and the body.
struct Answer {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  std::string Header(absl::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "";
  }
  bool Has(absl::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return true;
    }
    return false;
  }
};

Answer ParseCurl(const std::string& out) {
  Answer a;
  const size_t end = out.find("\r\n\r\n");
  const std::string head = out.substr(0, end);
  a.body = end == std::string::npos ? "" : out.substr(end + 4);
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  if (!lines.empty()) {
    std::vector<std::string> status = absl::StrSplit(lines[0], ' ');
    if (status.size() >= 2) a.status = std::stoi(status[1]);
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    a.headers.emplace_back(
        absl::AsciiStrToLower(lines[i].substr(0, colon)),
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  return a;
}

class CorsTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> origins) {
    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    CorsOptions cors;
    cors.allowed_origins = std::move(origins);
    auto handled = handled_;
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
        std::move(options),
        WithCors(std::move(cors), [handled](HttpRequest request,
                                            std::shared_ptr<HttpExchange> ex) {
          handled->fetch_add(1);
          if (request.path == "/stream") {
            ex->StartStream(200, {{"Content-Type", "text/event-stream"}});
            ex->Write("data: 1\n\n", {});
            ex->EndStream();
            return;
          }
          ex->Respond(200, {{"Content-Type", "application/json"}},
                      request.method == "OPTIONS" ? "handler" : "{}");
        }));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // curl -i with `args` (headers, method) on `path`.
  Answer Call(const std::string& path, std::vector<std::string> args) {
    std::vector<std::string> argv = {kCurl, "-sS", "-i", "--max-time", "20"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(absl::StrCat("http://127.0.0.1:", server_->port(), path));
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ParseCurl(r.out);
  }

  Answer Preflight(const std::string& origin) {
    return Call("/v1/chat/completions",
                {"-X", "OPTIONS", "-H", absl::StrCat("Origin: ", origin), "-H",
                 "Access-Control-Request-Method: POST", "-H",
                 "Access-Control-Request-Headers: authorization, "
                 "content-type, x-stainless-os"});
  }

  std::shared_ptr<std::atomic<int>> handled_ =
      std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<HttpServer> server_;
};

TEST_F(CorsTest, PreflightFromAnAllowedOriginIsAnsweredWithoutTheHandler) {
  Start({"http://localhost:3000", kApp});
  Answer a = Preflight(kApp);
  EXPECT_EQ(a.status, 204);
  EXPECT_EQ(a.Header("access-control-allow-origin"), kApp);
  EXPECT_TRUE(
      absl::StrContains(a.Header("access-control-allow-methods"), "POST"));
  EXPECT_EQ(a.Header("access-control-allow-headers"),
            "authorization, content-type, x-stainless-os");
  EXPECT_EQ(a.Header("access-control-max-age"), "600");
  EXPECT_EQ(a.Header("vary"), "Origin");
  EXPECT_EQ(handled_->load(), 0);
}

TEST_F(CorsTest, PreflightFromAnotherOriginIsRefused) {
  Start({kApp});
  Answer a = Preflight("https://evil.example.net");
  EXPECT_EQ(a.status, 403);
  EXPECT_FALSE(a.Has("access-control-allow-origin"));
  EXPECT_EQ(handled_->load(), 0);
}

TEST_F(CorsTest, AnswersToAnAllowedOriginCarryTheHeaders) {
  Start({kApp});
  Answer whole = Call("/v1/models", {"-H", absl::StrCat("Origin: ", kApp)});
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, "{}");
  EXPECT_EQ(whole.Header("access-control-allow-origin"), kApp);
  EXPECT_EQ(whole.Header("vary"), "Origin");
  EXPECT_TRUE(absl::StrContains(whole.Header("access-control-expose-headers"),
                                "retry-after"));

  Answer stream = Call("/stream", {"-N", "-H", absl::StrCat("Origin: ", kApp)});
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.Header("access-control-allow-origin"), kApp);
  EXPECT_TRUE(absl::StrContains(stream.body, "data: 1")) << stream.body;
  EXPECT_EQ(handled_->load(), 2);
}

TEST_F(CorsTest, OtherOriginsAndNoOriginAreServedWithoutTheHeaders) {
  Start({kApp});
  Answer other = Call("/v1/models", {"-H", "Origin: https://evil.example.net"});
  EXPECT_EQ(other.status, 200);
  EXPECT_FALSE(other.Has("access-control-allow-origin"));
  Answer none = Call("/v1/models", {});
  EXPECT_EQ(none.status, 200);
  EXPECT_FALSE(none.Has("access-control-allow-origin"));
  EXPECT_EQ(handled_->load(), 2);
}

TEST_F(CorsTest, StarAllowsEveryOrigin) {
  Start({"*"});
  EXPECT_EQ(Preflight("https://anything.example")
                .Header("access-control-allow-origin"),
            "*");
  Answer a = Call("/v1/models", {"-H", "Origin: http://localhost:5173"});
  EXPECT_EQ(a.Header("access-control-allow-origin"), "*");
}

TEST_F(CorsTest, OffByDefaultTheHandlerSeesEverything) {
  Start({});
  Answer a = Preflight(kApp);
  EXPECT_EQ(a.body, "handler");  // the handler's own answer to OPTIONS
  EXPECT_FALSE(a.Has("access-control-allow-origin"));
  EXPECT_EQ(handled_->load(), 1);
}

}  // namespace
}  // namespace paceline::server::http
