// HttpServer (server/http) against real clients: raw loopback sockets whose
// bytes the test writes itself, and curl. The handler is the test's own: it
// answers /echo at once and keeps every other request for the test to
// answer later, from the test's thread. Every wait has a deadline; no test
// asserts how long anything took.
#include "server/http/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/loopback.h"
#include "tests/testing/run_command.h"
#include "tests/testing/wait_for.h"

namespace paceline::server::http {
namespace {

using ::paceline::testing::CommandResult;
using ::paceline::testing::ConnectLoopback;
using ::paceline::testing::RecvResult;
using ::paceline::testing::RecvSome;
using ::paceline::testing::RunCommand;
using ::paceline::testing::SendAll;
using ::paceline::testing::WaitFor;

// How long any one wait may take before the test fails.
constexpr absl::Duration kDeadline = absl::Seconds(10);
constexpr char kCurl[] = "/usr/bin/curl";
constexpr char kOpenssl[] = "/usr/bin/openssl";

// ---------------------------------------------------------------------------
// A response as a raw client reads it off the wire.
struct Response {
  int status = 0;
  HttpHeaders headers;
  std::string body;  // de-chunked when chunked
  std::vector<std::string> chunks;
  bool chunked = false;

  std::string Header(absl::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (absl::EqualsIgnoreCase(n, name)) return v;
    }
    return "";
  }
  bool HasHeader(absl::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (absl::EqualsIgnoreCase(n, name)) return true;
    }
    return false;
  }
};

// A loopback TCP client: sends exactly the bytes it is given and reads
// responses byte by byte, each read bounded by kDeadline.
class RawClient {
 public:
  // `rcvbuf` > 0 shrinks the receive buffer (a slow reader's small window).
  explicit RawClient(int port, int rcvbuf = 0)
      : fd_(ConnectLoopback(port, rcvbuf)) {}
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }

  bool Send(absl::string_view bytes) { return SendAll(fd_, bytes); }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // One response: the head, then a Content-Length body, a chunked body, or
  // (neither) everything up to the close. nullopt when the bytes are not a
  // response or the server closed or went quiet first.
  std::optional<Response> Read() {
    std::optional<std::string> head = ReadUntil("\r\n\r\n");
    if (!head) return std::nullopt;
    std::optional<Response> r = ParseHead(*head);
    if (!r || r->status < 200) return r;
    if (absl::EqualsIgnoreCase(r->Header("Transfer-Encoding"), "chunked")) {
      r->chunked = true;
      if (!ReadChunks(&*r)) return std::nullopt;
    } else if (r->HasHeader("Content-Length")) {
      size_t length = 0;
      if (!absl::SimpleAtoi(r->Header("Content-Length"), &length)) {
        return std::nullopt;
      }
      std::optional<std::string> body = ReadBytes(length);
      if (!body) return std::nullopt;
      r->body = *std::move(body);
    } else {
      while (Fill() == kData) {
      }
      r->body = std::exchange(buf_, std::string());
    }
    return r;
  }

  // True once the server has closed the connection (EOF or reset); bytes
  // that arrive first are dropped. False if it is still open at kDeadline.
  bool WaitClosed() {
    for (;;) {
      switch (Fill()) {
        case kData:
          buf_.clear();
          break;
        case kClosed:
          return true;
        case kTimeout:
          return false;
      }
    }
  }

  // True when no byte arrives for `quiet` (the connection stays open).
  bool QuietFor(absl::Duration quiet) {
    return buf_.empty() && Fill(quiet) == kTimeout;
  }

 private:
  static constexpr RecvResult kData = RecvResult::kData;
  static constexpr RecvResult kClosed = RecvResult::kClosed;
  static constexpr RecvResult kTimeout = RecvResult::kTimeout;

  RecvResult Fill(absl::Duration timeout = kDeadline) {
    return RecvSome(fd_, timeout, &buf_);
  }

  std::optional<std::string> ReadUntil(absl::string_view end) {
    size_t at;
    while ((at = buf_.find(end.data(), 0, end.size())) == std::string::npos) {
      if (Fill() != kData) return std::nullopt;
    }
    std::string out = buf_.substr(0, at + end.size());
    buf_.erase(0, at + end.size());
    return out;
  }

  std::optional<std::string> ReadBytes(size_t n) {
    while (buf_.size() < n) {
      if (Fill() != kData) return std::nullopt;
    }
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  static std::optional<Response> ParseHead(absl::string_view head) {
    std::vector<absl::string_view> lines =
        absl::StrSplit(head.substr(0, head.size() - 4), "\r\n");
    Response r;
    std::vector<absl::string_view> status_line =
        absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
        !absl::SimpleAtoi(status_line[1], &r.status)) {
      return std::nullopt;
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) return std::nullopt;
      r.headers.emplace_back(
          std::string(lines[i].substr(0, colon)),
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
    }
    return r;
  }

  // RFC 9112 §7.1: hex size CRLF data CRLF, ..., "0" CRLF (no trailers) CRLF.
  bool ReadChunks(Response* r) {
    for (;;) {
      std::optional<std::string> line = ReadUntil("\r\n");
      if (!line) return false;
      size_t size = 0;
      if (!absl::SimpleHexAtoi(line->substr(0, line->size() - 2), &size)) {
        ADD_FAILURE() << "bad chunk size line '" << *line << "'";
        return false;
      }
      if (size == 0) {
        std::optional<std::string> end = ReadUntil("\r\n");
        return end && *end == "\r\n";
      }
      std::optional<std::string> data = ReadBytes(size + 2);
      if (!data || data->substr(size) != "\r\n") return false;
      r->chunks.push_back(data->substr(0, size));
      r->body += r->chunks.back();
    }
  }

  int fd_ = -1;
  std::string buf_;
};

std::string Get(absl::string_view target, absl::string_view extra = "") {
  return absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: test\r\n", extra,
                      "\r\n");
}

std::string Post(absl::string_view target, absl::string_view body) {
  return absl::StrCat("POST ", target,
                      " HTTP/1.1\r\nHost: test\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

// ---------------------------------------------------------------------------
// The test's handler: /echo is answered at once (the request's parts as
// headers, its body as the body); every other request is kept for the test.
// Everything that happens is logged in order.
struct Kept {
  HttpRequest request;
  std::shared_ptr<HttpExchange> exchange;
};

class Recorder {
 public:
  HttpHandler Handler(std::shared_ptr<int> sentinel = nullptr) {
    return [this, sentinel](HttpRequest request,
                            std::shared_ptr<HttpExchange> exchange) {
      Log(absl::StrCat("request ", request.path));
      if (request.path == "/echo") return Echo(request, *exchange);
      absl::MutexLock lock(&mu_);
      kept_.push_back(Kept{std::move(request), std::move(exchange)});
    };
  }

  // The next kept request, in arrival order; nullopt (a failure) if none
  // comes within kDeadline.
  std::optional<Kept> Next() {
    absl::MutexLock lock(&mu_);
    auto some = [this]()
                    ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !kept_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&some), kDeadline)) {
      ADD_FAILURE() << "no request reached the handler";
      return std::nullopt;
    }
    Kept k = std::move(kept_.front());
    kept_.pop_front();
    return k;
  }

  void Log(std::string event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // Waits until `n` events are logged (they are then compared whole).
  bool WaitEvents(size_t n) {
    if (WaitFor([&] { return Events().size() >= n; }, kDeadline,
                absl::StrCat(n, " events"))) {
      return true;
    }
    ADD_FAILURE() << "events so far: " << absl::StrJoin(Events(), ", ");
    return false;
  }
  // A `done` that logs "<name> ok" or "<name> failed".
  std::function<void(bool)> Done(std::string name) {
    return [this, name](bool ok) {
      Log(absl::StrCat(name, ok ? " ok" : " failed"));
    };
  }
  std::function<void()> OnClose(std::string name) {
    return [this, name] { Log(absl::StrCat(name, " closed")); };
  }

 private:
  static void Echo(const HttpRequest& r, HttpExchange& exchange) {
    exchange.Respond(200,
                     {{"Content-Type", "text/plain"},
                      {"X-Method", r.method},
                      {"X-Target", r.target},
                      {"X-Path", r.path},
                      {"X-Test", std::string(r.Header("x-test"))}},
                     r.body);
  }

  absl::Mutex mu_;
  std::deque<Kept> kept_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

using Events = std::vector<std::string>;

class HttpServerTest : public ::testing::Test {
 protected:
  // Starts the server on 127.0.0.1:0 with `options` (listen is set here).
  void StartServer(HttpServerOptions options = {},
                   std::shared_ptr<int> sentinel = nullptr) {
    options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<HttpServer>> s =
        HttpServer::Start(std::move(options), recorder_.Handler(sentinel));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  std::string Url(absl::string_view path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }

  Recorder recorder_;  // outlives the server, whose handler it is
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

// ---------------------------------------------------------------------------
// Whole responses and keep-alive.

TEST_F(HttpServerTest, WholeResponseCarriesStatusHeadersLengthAndBody) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(
      c.Send("POST /echo?x=1 HTTP/1.1\r\nHost: test\r\nX-TEST: yes\r\n"
             "Content-Length: 5\r\n\r\nhello"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("Content-Length"), "5");
  EXPECT_EQ(r->Header("Content-Type"), "text/plain");
  EXPECT_EQ(r->Header("X-Method"), "POST");
  EXPECT_EQ(r->Header("X-Target"), "/echo?x=1");
  EXPECT_EQ(r->Header("X-Path"), "/echo");
  EXPECT_EQ(r->Header("X-Test"), "yes");  // Header() ignores case
  EXPECT_EQ(r->body, "hello");
  EXPECT_FALSE(r->HasHeader("Connection"));
}

TEST_F(HttpServerTest, KeepAliveAnswersSeveralRequestsOnOneConnection) {
  StartServer();
  RawClient c(port_);
  for (int i = 0; i < 3; ++i) {
    const std::string body = absl::StrCat("request ", i);
    ASSERT_TRUE(c.Send(Post("/echo", body)));
    std::optional<Response> r = c.Read();
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->body, body);
  }
  EXPECT_EQ(server_->num_connections(), 1);
  EXPECT_TRUE(c.QuietFor(absl::Milliseconds(50)));  // and still open
}

TEST_F(HttpServerTest, ConnectionCloseClosesAfterTheAnswer) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/echo", "Connection: close\r\n")));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, Http10ClosesAfterTheAnswer) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("GET /echo HTTP/1.0\r\n\r\n"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, CurlReusesTheConnection) {
  StartServer();
  CommandResult r =
      RunCommand({kCurl, "-sS", "-v", Url("/echo?a"), Url("/echo?b")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "Re-using existing connection"))
      << r.err;
  EXPECT_EQ(recorder_.Events(), (Events{"request /echo", "request /echo"}));
}

// ---------------------------------------------------------------------------
// Pipelining: one request at a time, answers in request order.

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/late") + Get("/echo?second")));
  std::optional<Kept> late = recorder_.Next();
  ASSERT_TRUE(late.has_value());
  std::thread answer([&] {
    recorder_.Log("answer /late");
    late->exchange->Respond(200, {}, "late");
  });
  answer.join();
  std::optional<Response> first = c.Read();
  std::optional<Response> second = c.Read();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(first->body, "late");
  EXPECT_EQ(second->Header("X-Target"), "/echo?second");
  // The second request reached the handler only after the first's answer.
  EXPECT_EQ(recorder_.Events(),
            (Events{"request /late", "answer /late", "request /echo"}));
}

// ---------------------------------------------------------------------------
// Chunked streams.

TEST_F(HttpServerTest, StreamIsAValidChunkedBodyAndDonesRunInOrder) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/stream")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  HttpExchange& ex = *k->exchange;
  ex.StartStream(200, {{"Content-Type", "text/event-stream"}});
  ex.Write("data: a\n\n", recorder_.Done("write 1"));
  ex.Write("", recorder_.Done("write 2"));  // nothing on the wire
  ex.Write("data: bc\n\n", recorder_.Done("write 3"));
  ex.EndStream(recorder_.Done("end"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->chunked);
  EXPECT_FALSE(r->HasHeader("Content-Length"));
  EXPECT_EQ(r->Header("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->chunks,
            (std::vector<std::string>{"data: a\n\n", "data: bc\n\n"}));
  ASSERT_TRUE(recorder_.WaitEvents(5));
  EXPECT_EQ(recorder_.Events(), (Events{"request /stream", "write 1 ok",
                                        "write 2 ok", "write 3 ok", "end ok"}));
  // The connection serves the next request.
  ASSERT_TRUE(c.Send(Get("/echo")));
  std::optional<Response> next = c.Read();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->status, 200);
}

TEST_F(HttpServerTest, StreamWithNoWritesIsHeadAndLastChunk) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/stream")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  k->exchange->StartStream(204, {});
  k->exchange->EndStream();
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 204);
  EXPECT_TRUE(r->chunks.empty());
}

// Writes queued while a write is stuck behind a reader that does not read go
// out after it, in order, each `done` true.
TEST_F(HttpServerTest, WritesQueuedBehindASlowReaderGoOutInOrder) {
  StartServer();
  RawClient c(port_, /*rcvbuf=*/4096);
  ASSERT_TRUE(c.Send(Get("/stream")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  HttpExchange& ex = *k->exchange;
  // Larger than every socket buffer between the two: in flight until read.
  const std::string big(16 << 20, 'x');
  ex.StartStream(200, {});
  ex.Write(big, recorder_.Done("big"));
  for (int i = 0; i < 5; ++i) {
    ex.Write(absl::StrCat("small ", i), recorder_.Done(absl::StrCat(i)));
  }
  ex.EndStream(recorder_.Done("end"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->chunks.size(), 6u);
  EXPECT_EQ(r->chunks[0], big);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r->chunks[i + 1], absl::StrCat("small ", i));
  }
  ASSERT_TRUE(recorder_.WaitEvents(8));
  EXPECT_EQ(recorder_.Events(),
            (Events{"request /stream", "big ok", "0 ok", "1 ok", "2 ok", "3 ok",
                    "4 ok", "end ok"}));
}

TEST_F(HttpServerTest, CurlReadsAStream) {
  StartServer();
  std::thread answer([&] {
    std::optional<Kept> k = recorder_.Next();
    if (!k) return;
    k->exchange->StartStream(200, {{"Content-Type", "text/event-stream"}});
    k->exchange->Write("data: 1\n\n", {});
    k->exchange->Write("data: 2\n\n", {});
    k->exchange->EndStream();
  });
  CommandResult r = RunCommand({kCurl, "-sS", "-N", "-v", Url("/stream")});
  answer.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "data: 1\n\ndata: 2\n\n");
  EXPECT_TRUE(absl::StrContains(r.err, "Transfer-Encoding: chunked")) << r.err;
}

// ---------------------------------------------------------------------------
// A client that goes away while its answer is pending.

TEST_F(HttpServerTest, ClientGoneBeforeTheAnswerRunsOnClose) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/late")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  k->exchange->SetOnClose(recorder_.OnClose("late"));
  c.Close();
  ASSERT_TRUE(recorder_.WaitEvents(2));
  k->exchange->Respond(200, {}, "too late", recorder_.Done("respond"));
  ASSERT_TRUE(recorder_.WaitEvents(3));
  EXPECT_EQ(recorder_.Events(),
            (Events{"request /late", "late closed", "respond failed"}));
  EXPECT_TRUE(WaitFor([&] { return server_->num_connections() == 0; },
                      kDeadline, "the connection gone"));
}

TEST_F(HttpServerTest, ClientGoneMidStreamRunsOnCloseAndFailsLaterWrites) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/stream")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  HttpExchange& ex = *k->exchange;
  ex.SetOnClose(recorder_.OnClose("stream"));
  ex.StartStream(200, {});
  ex.Write("first", recorder_.Done("write 1"));
  ASSERT_TRUE(recorder_.WaitEvents(2));
  c.Close();
  ASSERT_TRUE(recorder_.WaitEvents(3));
  ex.Write("second", recorder_.Done("write 2"));
  ex.EndStream(recorder_.Done("end"));
  ASSERT_TRUE(recorder_.WaitEvents(5));
  EXPECT_EQ(recorder_.Events(),
            (Events{"request /stream", "write 1 ok", "stream closed",
                    "write 2 failed", "end failed"}));
}

TEST_F(HttpServerTest, OnCloseSetAfterTheClientLeftStillRuns) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/late")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  c.Close();
  ASSERT_TRUE(WaitFor([&] { return server_->num_connections() == 0; },
                      kDeadline, "the connection gone"));
  k->exchange->SetOnClose(recorder_.OnClose("late"));
  ASSERT_TRUE(recorder_.WaitEvents(2));
  EXPECT_EQ(recorder_.Events(), (Events{"request /late", "late closed"}));
}

// ---------------------------------------------------------------------------
// Limits: each refusal has its status, and the connection is closed after.

// Reads one response and the close after it; the response's status.
int RefusalStatus(RawClient& c, Response* out = nullptr) {
  std::optional<Response> r = c.Read();
  if (!r) return 0;
  EXPECT_EQ(r->Header("Connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
  if (out != nullptr) *out = *r;
  return r->status;
}

TEST_F(HttpServerTest, HeadersOverTheLimitGet431) {
  HttpServerOptions o;
  o.max_header_bytes = 1024;
  StartServer(o);
  RawClient c(port_);
  ASSERT_TRUE(c.Send(
      Get("/echo", absl::StrCat("X-Big: ", std::string(2000, 'a'), "\r\n"))));
  EXPECT_EQ(RefusalStatus(c), 431);
  EXPECT_TRUE(recorder_.Events().empty());
}

TEST_F(HttpServerTest, BodyOverTheLimitGets413) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  StartServer(o);
  {  // At the limit: served.
    RawClient c(port_);
    ASSERT_TRUE(c.Send(Post("/echo", std::string(1024, 'b'))));
    std::optional<Response> r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->body.size(), 1024u);
  }
  {  // Content-Length says too much: refused before the body is sent.
    RawClient c(port_);
    ASSERT_TRUE(c.Send(
        "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1025\r\n\r\n"));
    EXPECT_EQ(RefusalStatus(c), 413);
  }
  {  // Chunked: the chunks add up to too much.
    RawClient c(port_);
    std::string chunk = absl::StrCat("258\r\n", std::string(600, 'c'), "\r\n");
    ASSERT_TRUE(c.Send(absl::StrCat(
        "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n"
        "\r\n",
        chunk, chunk, "0\r\n\r\n")));
    EXPECT_EQ(RefusalStatus(c), 413);
  }
  EXPECT_EQ(recorder_.Events(), (Events{"request /echo"}));
}

// A client that sends its whole body at once (no Expect) still reads the
// 413: the refusal is not lost to a reset from the unread bytes.
TEST_F(HttpServerTest, BodyOverTheLimitSentWholeStillGets413) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  StartServer(o);
  for (int i = 0; i < 5; ++i) {
    RawClient c(port_);
    c.Send(Post("/echo", std::string(256 << 10, 'w')));  // may be cut off
    EXPECT_EQ(RefusalStatus(c), 413) << i;
  }
  EXPECT_TRUE(recorder_.Events().empty());
}

TEST_F(HttpServerTest, ChunkedBodyUnderTheLimitIsServed) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n"
      "\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "hello world");
}

TEST_F(HttpServerTest, RequestStalledMidHeadersGets408) {
  HttpServerOptions o;
  o.request_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawClient c(port_);
  ASSERT_TRUE(c.Send("GET /echo HTTP/1.1\r\nHost: te"));
  EXPECT_EQ(RefusalStatus(c), 408);
  EXPECT_TRUE(recorder_.Events().empty());
}

TEST_F(HttpServerTest, RequestStalledMidBodyGets408) {
  HttpServerOptions o;
  o.request_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawClient c(port_);
  ASSERT_TRUE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nabc"));
  EXPECT_EQ(RefusalStatus(c), 408);
  EXPECT_TRUE(recorder_.Events().empty());
}

TEST_F(HttpServerTest, GarbageGets400) {
  StartServer();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("THIS IS NOT HTTP\r\n\r\n"));
  EXPECT_EQ(RefusalStatus(c), 400);
  RawClient c2(port_);
  ASSERT_TRUE(c2.Send(
      "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: zz\r\n\r\n"));
  EXPECT_EQ(RefusalStatus(c2), 400);
  EXPECT_TRUE(recorder_.Events().empty());
}

TEST_F(HttpServerTest, ExtraConnectionGets503WhileTheOthersWork) {
  HttpServerOptions o;
  o.max_connections = 2;
  StartServer(o);
  RawClient a(port_), b(port_);
  for (RawClient* c : {&a, &b}) {
    ASSERT_TRUE(c->Send(Get("/echo")));
    ASSERT_TRUE(c->Read().has_value());
  }
  ASSERT_EQ(server_->num_connections(), 2);
  {
    RawClient extra(port_);
    Response r;
    EXPECT_EQ(RefusalStatus(extra, &r), 503);
    EXPECT_EQ(r.Header("Retry-After"), "1");
  }
  for (RawClient* c : {&a, &b}) {
    ASSERT_TRUE(c->Send(Get("/echo")));
    std::optional<Response> r = c->Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
  }
  // Once one leaves, a new connection is served.
  a.Close();
  ASSERT_TRUE(WaitFor([&] { return server_->num_connections() == 1; },
                      kDeadline, "one connection left"));
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/echo")));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  HttpServerOptions o;
  o.idle_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawClient used(port_), silent(port_);
  ASSERT_TRUE(used.Send(Get("/echo")));
  ASSERT_TRUE(used.Read().has_value());
  EXPECT_TRUE(used.WaitClosed());
  EXPECT_TRUE(silent.WaitClosed());
  EXPECT_TRUE(WaitFor([&] { return server_->num_connections() == 0; },
                      kDeadline, "no connections"));
}

// The timeouts bound reading a request and waiting for one, not the answer.
TEST_F(HttpServerTest, SlowAnswerOutlivesTheTimeouts) {
  HttpServerOptions o;
  o.idle_timeout = absl::Milliseconds(100);
  o.request_timeout = absl::Milliseconds(100);
  StartServer(o);
  RawClient c(port_);
  ASSERT_TRUE(c.Send(Get("/late")));
  std::optional<Kept> k = recorder_.Next();
  ASSERT_TRUE(k.has_value());
  absl::SleepFor(absl::Milliseconds(500));
  k->exchange->Respond(200, {}, "late");
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "late");
}

TEST_F(HttpServerTest, Expect100ContinueIsAnsweredBeforeTheBody) {
  StartServer();
  RawClient c(port_);
  const std::string body(2048, 'e');
  ASSERT_TRUE(c.Send(absl::StrCat(
      "POST /echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n")));
  std::optional<Response> interim = c.Read();
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send(body));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
}

// A body the limit refuses is refused at once, without the 100.
TEST_F(HttpServerTest, Expect100ContinueOverTheLimitGets413Instead) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  StartServer(o);
  RawClient c(port_);
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\n"
             "Content-Length: 2048\r\n\r\n"));
  EXPECT_EQ(RefusalStatus(c), 413);
}

TEST_F(HttpServerTest, CurlGets100ContinueForALargeBody) {
  StartServer();
  // curl 7.88 sends Expect: 100-continue by itself for bodies over 1 MiB.
  const std::string body(2 << 20, 'q');
  const std::string path = ::paceline::testing::WriteFile("body", body);
  CommandResult r = RunCommand(
      {kCurl, "-sS", "-v", "--data-binary", "@" + path, Url("/echo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == body) << r.out.size() << " bytes back";
  EXPECT_TRUE(absl::StrContains(r.err, "Expect: 100-continue")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "HTTP/1.1 100 Continue")) << r.err;
}

TEST_F(HttpServerTest, ErrorBodyHookShapesRefusals) {
  HttpServerOptions o;
  o.max_body_bytes = 16;
  o.error_body = [](int status, absl::string_view message) {
    return std::make_pair(
        absl::StrCat("{\"status\":", status, ",\"message_given\":",
                     message.empty() ? "false" : "true", "}"),
        std::string("application/json"));
  };
  StartServer(o);
  RawClient garbage(port_);
  ASSERT_TRUE(garbage.Send("THIS IS NOT HTTP\r\n\r\n"));
  Response r;
  EXPECT_EQ(RefusalStatus(garbage, &r), 400);
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  EXPECT_EQ(r.body, "{\"status\":400,\"message_given\":true}");
  RawClient large(port_);
  ASSERT_TRUE(large.Send(Post("/echo", std::string(17, 'l'))));
  EXPECT_EQ(RefusalStatus(large, &r), 413);
  EXPECT_EQ(r.body, "{\"status\":413,\"message_given\":true}");
}

TEST_F(HttpServerTest, RefusalsAreTextWithoutTheHook) {
  StartServer();
  RawClient garbage(port_);
  ASSERT_TRUE(garbage.Send("THIS IS NOT HTTP\r\n\r\n"));
  Response r;
  EXPECT_EQ(RefusalStatus(garbage, &r), 400);
  EXPECT_TRUE(absl::StartsWith(r.Header("Content-Type"), "text/plain"));
  EXPECT_FALSE(r.body.empty());
}

// ---------------------------------------------------------------------------
// Start's errors.

TEST(HttpServerStartTest, RefusesBadAddressesAndTlsMaterial) {
  HttpHandler handler = [](HttpRequest, std::shared_ptr<HttpExchange>) {};
  for (const char* listen :
       {"", "127.0.0.1", "nohost:80", "127.0.0.1:99999", "127.0.0.1:x"}) {
    HttpServerOptions o;
    o.listen = listen;
    EXPECT_EQ(HttpServer::Start(o, handler).status().code(),
              absl::StatusCode::kInvalidArgument)
        << listen;
  }
  HttpServerOptions tls;
  tls.listen = "127.0.0.1:0";
  tls.cert_pem = "not a certificate";
  tls.key_pem = "not a key";
  EXPECT_EQ(HttpServer::Start(tls, handler).status().code(),
            absl::StatusCode::kInvalidArgument);

  HttpServerOptions first;
  first.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<HttpServer>> taken =
      HttpServer::Start(first, handler);
  ASSERT_TRUE(taken.ok()) << taken.status();
  HttpServerOptions second;
  second.listen = absl::StrCat("127.0.0.1:", (*taken)->port());
  EXPECT_EQ(HttpServer::Start(second, handler).status().code(),
            absl::StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------
// TLS, with certificates made by openssl for this test.

struct Certs {
  std::string dir;
  std::string ca, ca_key;          // a CA for client certificates
  std::string server, server_key;  // self-signed, for localhost
  std::string client, client_key;  // signed by the CA
};

bool Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), kOpenssl);
  CommandResult r = RunCommand(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0;
}

std::optional<Certs> MakeCerts() {
  Certs c;
  c.dir = ::paceline::testing::MakeTempDir("http_tls");
  if (c.dir.empty()) return std::nullopt;
  auto at = [&](const char* name) { return absl::StrCat(c.dir, "/", name); };
  c.ca = at("ca.pem"), c.ca_key = at("ca.key");
  c.server = at("server.pem"), c.server_key = at("server.key");
  c.client = at("client.pem"), c.client_key = at("client.key");
  const std::string csr = at("client.csr");
  const bool ok =
      Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
               "/CN=Paceline test CA", "-days", "1", "-keyout", c.ca_key,
               "-out", c.ca}) &&
      Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
               "/CN=localhost", "-addext",
               "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "1",
               "-keyout", c.server_key, "-out", c.server}) &&
      Openssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj",
               "/CN=test client", "-keyout", c.client_key, "-out", csr}) &&
      Openssl({"x509", "-req", "-in", csr, "-CA", c.ca, "-CAkey", c.ca_key,
               "-set_serial", "2", "-days", "1", "-out", c.client});
  if (!ok) return std::nullopt;
  return c;
}

class HttpServerTlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    if (access(kOpenssl, X_OK) != 0) GTEST_SKIP() << "no " << kOpenssl;
    certs_ = MakeCerts();
    ASSERT_TRUE(certs_.has_value());
  }
  void TearDown() override {
    if (certs_) RunCommand({"/bin/rm", "-rf", certs_->dir});
  }

  HttpServerOptions TlsOptions() const {
    HttpServerOptions o;
    o.cert_pem = ::paceline::testing::ReadFile(certs_->server);
    o.key_pem = ::paceline::testing::ReadFile(certs_->server_key);
    return o;
  }

  // curl https://localhost:PORT/echo -d hello, trusting the server's cert.
  CommandResult Curl(std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {
        kCurl,       "-sS",
        "--cacert",  certs_->server,
        "--resolve", absl::StrCat("localhost:", port_, ":127.0.0.1"),
        "-d",        "hello"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(absl::StrCat("https://localhost:", port_, "/echo"));
    return RunCommand(argv);
  }

  std::optional<Certs> certs_;
};

TEST_F(HttpServerTlsTest, CurlTalksTls) {
  StartServer(TlsOptions());
  CommandResult r = Curl();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello");
  // Plain HTTP on the TLS port gets no answer.
  RawClient plain(port_);
  ASSERT_TRUE(plain.Send(Get("/echo")));
  EXPECT_FALSE(plain.Read().has_value());
}

TEST_F(HttpServerTlsTest, SilentClientIsClosedDuringTheHandshake) {
  HttpServerOptions o = TlsOptions();
  o.request_timeout = absl::Milliseconds(300);
  StartServer(o);
  RawClient silent(port_);
  EXPECT_TRUE(silent.WaitClosed());
}

TEST_F(HttpServerTlsTest, ClientCaRequiresASignedClientCert) {
  HttpServerOptions o = TlsOptions();
  o.client_ca_pem = ::paceline::testing::ReadFile(certs_->ca);
  StartServer(o);
  CommandResult without = Curl();
  EXPECT_NE(without.exit_code, 0);
  EXPECT_EQ(without.out, "");
  // A certificate the CA did not sign: the server's own.
  CommandResult wrong =
      Curl({"--cert", certs_->server, "--key", certs_->server_key});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_EQ(wrong.out, "");
  CommandResult with =
      Curl({"--cert", certs_->client, "--key", certs_->client_key});
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, "hello");
  EXPECT_EQ(recorder_.Events(), (Events{"request /echo"}));
}

// ---------------------------------------------------------------------------
// Stop.

TEST_F(HttpServerTest, StopClosesEverythingRunsOnCloseAndFreesTheServer) {
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> alive = sentinel;
  StartServer({}, std::move(sentinel));
  RawClient idle(port_), pending(port_), streaming(port_);
  ASSERT_TRUE(idle.Send(Get("/echo")));
  ASSERT_TRUE(idle.Read().has_value());
  ASSERT_TRUE(pending.Send(Get("/late")));
  std::optional<Kept> late = recorder_.Next();
  ASSERT_TRUE(late.has_value());
  late->exchange->SetOnClose(recorder_.OnClose("late"));
  ASSERT_TRUE(streaming.Send(Get("/stream")));
  std::optional<Kept> stream = recorder_.Next();
  ASSERT_TRUE(stream.has_value());
  stream->exchange->SetOnClose(recorder_.OnClose("stream"));
  stream->exchange->StartStream(200, {});
  stream->exchange->Write("first", recorder_.Done("write 1"));
  ASSERT_TRUE(recorder_.WaitEvents(4));

  server_->Stop();
  Events events = recorder_.Events();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_TRUE(absl::c_linear_search(events, "late closed"));
  EXPECT_TRUE(absl::c_linear_search(events, "stream closed"));
  EXPECT_EQ(server_->num_connections(), 0);
  for (RawClient* c : {&idle, &pending, &streaming}) {
    EXPECT_TRUE(c->WaitClosed());
  }
  // Calls after Stop are dropped, and say so.
  stream->exchange->Write("second", recorder_.Done("write 2"));
  late->exchange->Respond(200, {}, "late", recorder_.Done("respond"));
  ASSERT_TRUE(recorder_.WaitEvents(8));
  server_->Stop();  // idempotent
  late.reset();
  stream.reset();
  server_.reset();
  EXPECT_TRUE(alive.expired()) << "the server's state outlived it";
}

// ---------------------------------------------------------------------------
// Several io threads.

TEST_F(HttpServerTest, SeveralThreadsServeManyClientsAtOnce) {
  HttpServerOptions o;
  o.threads = 4;
  StartServer(o);
  std::atomic<int> served{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      RawClient c(port_);
      for (int j = 0; j < 20; ++j) {
        const std::string body = absl::StrCat(i, "/", j);
        if (!c.Send(Post("/echo", body))) return;
        std::optional<Response> r = c.Read();
        if (!r || r->body != body) return;
        ++served;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(served.load(), 16 * 20);
}

// Calls made after Stop, from many threads at once, each hear done(false),
// in call order per caller; then nothing of the server is left.
TEST_F(HttpServerTest, LateCallsAfterStopAllFailInOrder) {
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> alive = sentinel;
  HttpServerOptions o;
  o.threads = 4;
  StartServer(o, std::move(sentinel));
  constexpr int kStreams = 8, kWrites = 10;
  std::vector<std::unique_ptr<RawClient>> clients;
  std::vector<Kept> kept;
  for (int i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->Send(Get("/stream")));
    std::optional<Kept> k = recorder_.Next();
    ASSERT_TRUE(k.has_value());
    k->exchange->StartStream(200, {});
    kept.push_back(*std::move(k));
  }
  server_->Stop();
  absl::Mutex mu;
  std::vector<std::vector<int>> heard(kStreams);  // guarded by mu
  int failed = 0;                                 // guarded by mu
  std::vector<std::thread> callers;
  for (int i = 0; i < kStreams; ++i) {
    callers.emplace_back([&, i] {
      for (int j = 0; j < kWrites; ++j) {
        kept[i].exchange->Write("late", [&, i, j](bool ok) {
          absl::MutexLock lock(&mu);
          heard[i].push_back(j);
          if (!ok) ++failed;
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::MutexLock lock(&mu);
        return failed == kStreams * kWrites;
      },
      kDeadline, "every late write to fail"));
  {
    absl::MutexLock lock(&mu);
    for (int i = 0; i < kStreams; ++i) {
      std::vector<int> in_order(kWrites);
      for (int j = 0; j < kWrites; ++j) in_order[j] = j;
      EXPECT_EQ(heard[i], in_order) << i;
    }
  }
  kept.clear();
  server_.reset();
  EXPECT_TRUE(WaitFor([&] { return alive.expired(); }, kDeadline,
                      "the server's state gone"));
}

}  // namespace
}  // namespace paceline::server::http
