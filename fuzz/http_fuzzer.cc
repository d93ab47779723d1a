// libFuzzer target for the HTTP server's request reading and the OpenAI
// body mapping behind it: each input is sent as raw bytes on a fresh
// loopback connection to a real HttpServer (server/http, started once with
// small limits), the write side is then shut, and the answer read to the
// connection's close.
//
// The handler parses /v1/completions and /v1/chat/completions bodies as
// the daemon does (server/openai) and answers 200 or the refusal's HTTP
// status; any other path gets 404.
//
// Checks beyond the sanitizers': every connection is answered and closed
// within 5 s (no hang); an answer, when there is one, starts with an
// HTTP/1.1 status line; no connection stays open once its client is gone.
//
// Replayed by ctest (http_fuzz_replay) over its seeds and regressions.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/http/http_server.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_request.h"

namespace {

namespace http = ::paceline::server::http;
namespace openai = ::paceline::server::openai;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "http_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

// A client-side failure that is not the server's fault: the fuzzer stops,
// naming the call and its errno, but not as a broken invariant.
[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "http_fuzzer: %s failed: %s\n", what,
               std::strerror(errno));
  std::abort();
}

void Handle(http::HttpRequest request,
            std::shared_ptr<http::HttpExchange> exchange) {
  const bool chat = request.path == "/v1/chat/completions";
  if (!chat && request.path != "/v1/completions") {
    exchange->Respond(404, {}, "no such route");
    return;
  }
  const auto parsed = chat ? openai::ParseChatCompletionRequest(request.body)
                           : openai::ParseCompletionRequest(request.body);
  if (parsed.ok()) {
    exchange->Respond(200, {}, "parsed");
    return;
  }
  openai::ErrorResponse error = openai::ToErrorResponse(parsed.status());
  Check(error.http_status >= 400 && error.http_status < 500,
        "a refused body is the client's error (4xx)");
  exchange->Respond(error.http_status, {}, std::move(error.body));
}

http::HttpServer& Server() {
  static http::HttpServer* server = [] {
    http::HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.max_header_bytes = 2048;
    options.max_body_bytes = 16 * 1024;
    options.request_timeout = absl::Seconds(2);
    options.idle_timeout = absl::Seconds(2);
    auto started = http::HttpServer::Start(options, Handle);
    Check(started.ok(), "the HTTP server starts");
    return started->release();
  }();
  return *server;
}

// A loopback connection to the server. Tens of thousands of inputs a minute
// would leave as many sockets in TIME_WAIT, each holding a local port (the
// client closes first): a port that is momentarily unavailable is waited
// for, not taken for a finding.
int Connect() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(Server().port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  static uint32_t next_source = 0;
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) Fail("socket()");
    // From 127.0.0.2 to .251 in turn: each source address has its own
    // local ports, so TIME_WAIT spreads over 250 times as many.
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + next_source++ % 250);
#ifdef IP_BIND_ADDRESS_NO_PORT
    const int no_port = 1;  // the port is chosen at connect, by 4-tuple
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &no_port,
               sizeof(no_port));
#endif
    if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
      Fail("bind() to a loopback source address");
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return fd;
    }
    const int error = errno;
    close(fd);
    errno = error;
    if ((error != EADDRNOTAVAIL && error != EAGAIN && error != EINTR) ||
        absl::Now() > deadline) {
      Fail("connect() to the server");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Closes with a reset instead of a FIN (the answer has been read to its
// end already), so a connection the server closed first leaves no
// TIME_WAIT behind; one whose FIN came after ours still does.
void CloseWithoutTimeWait(int fd) {
  const linger abort_on_close{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close,
             sizeof(abort_on_close));
  close(fd);
}

// Sends `bytes`, shuts the write side, and reads until the server closes:
// what it answered. Aborts when it has not closed within 5 s.
std::string Exchange(absl::string_view bytes) {
  const int fd = Connect();
  // The server may answer (and close) before it read everything: a failed
  // send is not a finding.
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    Check(left > 0, "the server closes the connection within 5 s");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;  // closed (or reset after a refusal)
    if (answer.size() < 64) answer.append(buf, static_cast<size_t>(n));
  }
  CloseWithoutTimeWait(fd);
  return answer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string answer =
      Exchange(absl::string_view(reinterpret_cast<const char*>(data), size));
  Check(answer.empty() || absl::StartsWith(answer, "HTTP/1.1 "),
        "an answer starts with a status line");
  // The server notices the close asynchronously: give it a moment.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (Server().num_connections() > 0) {
    Check(absl::Now() < deadline, "no connection outlives its client");
    absl::SleepFor(absl::Microseconds(50));
  }
  return 0;
}
