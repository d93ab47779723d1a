// HTTP/1.1 request framing (RFC 9112 §6): CheckFraming's verdicts
// (server/http/http_framing.h), and a real HttpServer on a loopback port
// refusing every request-smuggling shape. Each refused request is sent with
// a pipelined `GET /smuggled` in the same write: the refusal must be the
// only answer, the connection must close, and the handler must never see
// /smuggled. Every read has a deadline; nothing sleeps.
#include "server/http/http_framing.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/http/http_server.h"
#include "tests/testing/loopback.h"

namespace paceline::server::http {
namespace {

using ::paceline::testing::ConnectLoopback;
using ::paceline::testing::RecvResult;
using ::paceline::testing::RecvSome;
using ::paceline::testing::SendAll;

constexpr absl::Duration kDeadline = absl::Seconds(10);
constexpr char kSmuggled[] = "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";

// ---------------------------------------------------------------------------
// CheckFraming.

FramingError Check(std::vector<std::pair<std::string, std::string>> fields,
                   int version = 11) {
  FramingFields f;
  f.version = version;
  for (const auto& [name, value] : fields) f.Add(name, value);
  return CheckFraming(f);
}

TEST(CheckFramingTest, AcceptsPlainFraming) {
  EXPECT_TRUE(Check({}).ok());
  EXPECT_TRUE(Check({{"Host", "x"}}, 10).ok());
  EXPECT_TRUE(Check({{"Content-Length", "12"}}).ok());
  EXPECT_TRUE(Check({{"Content-Length", "12"}}, 10).ok());
  EXPECT_TRUE(Check({{"transfer-encoding", "chunked"}}).ok());
  EXPECT_TRUE(Check({{"Transfer-Encoding", " CHUNKED "}}).ok());
  EXPECT_TRUE(Check({{"Transfer-Encoding", ", chunked,"}}).ok());
}

TEST(CheckFramingTest, RepeatedEqualContentLengthsAreOne) {
  EXPECT_TRUE(Check({{"Content-Length", "5"}, {"content-length", "5"}}).ok());
  EXPECT_TRUE(Check({{"Content-Length", "5, 5"}}).ok());
}

TEST(CheckFramingTest, DifferentOrMalformedContentLengthsAre400) {
  for (const char* value : {"5, 6", "", " ", "-1", "+5", "5 5", "0x10", "5;",
                            "99999999999999999999"}) {
    EXPECT_EQ(Check({{"Content-Length", value}}).status, 400) << value;
  }
  EXPECT_EQ(Check({{"Content-Length", "5"}, {"Content-Length", "6"}}).status,
            400);
}

TEST(CheckFramingTest, BothHeadersAre400) {
  EXPECT_EQ(
      Check({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}}).status,
      400);
  EXPECT_EQ(Check({{"Transfer-Encoding", "xchunked"}, {"Content-Length", "0"}})
                .status,
            400);
}

TEST(CheckFramingTest, FinalCodingNotChunkedIs400) {
  for (const char* value : {"xchunked", "gzip", "identity", "chunked, identity",
                            "chunked, gzip", "", " , ", "chunkedx"}) {
    EXPECT_EQ(Check({{"Transfer-Encoding", value}}).status, 400) << value;
  }
}

TEST(CheckFramingTest, UnimplementedCodingBeforeChunkedIs501) {
  for (const char* value : {"gzip, chunked", "identity,chunked",
                            "gzip, deflate, chunked", "x-custom ,chunked"}) {
    const FramingError e = Check({{"Transfer-Encoding", value}});
    EXPECT_EQ(e.status, 501) << value;
  }
  EXPECT_TRUE(absl::StrContains(
      Check({{"Transfer-Encoding", "gzip, chunked"}}).message, "gzip"));
}

TEST(CheckFramingTest, ChunkedTwiceIs400) {
  EXPECT_EQ(Check({{"Transfer-Encoding", "chunked, chunked"}}).status, 400);
  EXPECT_EQ(Check({{"Transfer-Encoding", "gzip, chunked, chunked"}}).status,
            400);
}

TEST(CheckFramingTest, RepeatedLinesAreOneList) {
  EXPECT_EQ(
      Check({{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}})
          .status,
      501);
  EXPECT_EQ(Check({{"Transfer-Encoding", "chunked"},
                   {"Transfer-Encoding", "identity"}})
                .status,
            400);
  EXPECT_EQ(Check({{"Transfer-Encoding", "chunked"},
                   {"Transfer-Encoding", "chunked"}})
                .status,
            400);
}

// Beast replaces an obs-fold with a space: the list "gzip chunked" (no
// comma) is malformed, never "chunked".
TEST(CheckFramingTest, MalformedCodingListsAre400) {
  for (const char* value :
       {"gzip chunked", "chunked gzip", "chunked;ext=1", "chunked\tx",
        "\"chunked\"", "chunked, ch/unked", "chunked\r", "\vchunked"}) {
    EXPECT_EQ(Check({{"Transfer-Encoding", value}}).status, 400) << value;
  }
}

TEST(CheckFramingTest, TransferEncodingInHttp10Is400) {
  EXPECT_EQ(Check({{"Transfer-Encoding", "chunked"}}, 10).status, 400);
  EXPECT_EQ(Check({{"Transfer-Encoding", "gzip, chunked"}}, 10).status, 400);
}

TEST(CheckFramingTest, OnlyFramingFieldsCount) {
  EXPECT_TRUE(Check({{"TE", "gzip"}, {"X-Transfer-Encoding", "gzip"}}).ok());
  EXPECT_TRUE(Check({{"Content-Type", "x"}, {"Content-Length-X", "a"}}).ok());
}

TEST(HasObsFoldTest, FindsAFoldBeforeTheHeaderEnd) {
  EXPECT_TRUE(HasObsFold("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"));
  EXPECT_TRUE(HasObsFold("A: b\r\n\tc\r\n"));
  EXPECT_TRUE(HasObsFold("GET / HTTP/1.1\r\n A: b\r\n\r\n"));
  EXPECT_TRUE(HasObsFold("A:\r\n chunked"));  // not yet complete
}

TEST(HasObsFoldTest, ResumesWhereItStopped) {
  // A header arriving a byte at a time: each call judges only the lines
  // completed since the last, and finds the fold when its first byte is in.
  const std::string header = "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n";
  size_t resume = 0;
  size_t found_at = 0;
  for (size_t n = 1; n <= header.size(); ++n) {
    if (HasObsFold(absl::string_view(header).substr(0, n), &resume)) {
      found_at = n;
      break;
    }
    EXPECT_LE(resume, n);
  }
  EXPECT_EQ(found_at, header.find(" c") + 1);
  // Without a fold: false at every length, resume at the last line start.
  const std::string plain = "GET / HTTP/1.1\r\nA: b\r\n\r\nbody";
  resume = 0;
  for (size_t n = 1; n <= plain.size(); ++n) {
    EXPECT_FALSE(HasObsFold(absl::string_view(plain).substr(0, n), &resume));
  }
  EXPECT_EQ(resume, plain.find("\r\n\r\n") + 2);  // the blank line
}

TEST(HasObsFoldTest, IgnoresTheBodyAndIncompleteLines) {
  EXPECT_FALSE(HasObsFold(""));
  EXPECT_FALSE(HasObsFold("GET / HTTP/1.1\r\nA: b\r\n"));
  EXPECT_FALSE(HasObsFold("GET / HTTP/1.1\r\nA: b\r\n\r\n body\r\n x"));
  EXPECT_FALSE(HasObsFold("\r\n\r\n x"));
  EXPECT_FALSE(HasObsFold("\r\n x"));  // parsed fields, then the blank line
  EXPECT_FALSE(HasObsFold("A: b c\r\n"));
}

// ---------------------------------------------------------------------------
// Against a real server.

// A loopback client whose every read waits at most kDeadline.
class Client {
 public:
  explicit Client(int port) : fd_(ConnectLoopback(port)) {}
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }

  // False when the server stopped reading (it may refuse before the end).
  bool Send(absl::string_view bytes) { return SendAll(fd_, bytes); }

  // Everything until the server closes (EOF or reset); `*closed` is false
  // when it was still open at the deadline.
  std::string ReadToClose(bool* closed) {
    while (Fill()) {
    }
    *closed = !timed_out_;
    return std::exchange(buf_, "");
  }

  // One response with a Content-Length body: "STATUS BODY", or "" when
  // none came.
  std::string ReadResponse() {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return "";
    }
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t length = 0;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        (void)absl::SimpleAtoi(line.substr(15), &length);
      }
    }
    while (buf_.size() < length) {
      if (!Fill()) return "";
    }
    std::string out =
        absl::StrCat(head.substr(9, 3), " ", buf_.substr(0, length));
    buf_.erase(0, length);
    return out;
  }

 private:
  // Appends what arrives within kDeadline; false at EOF, reset or timeout.
  bool Fill() {
    const RecvResult r = RecvSome(fd_, kDeadline, &buf_);
    if (r == RecvResult::kTimeout) timed_out_ = true;
    return r == RecvResult::kData;
  }

  const int fd_;
  bool timed_out_ = false;
  std::string buf_;
};

// The requests the handler saw: "PATH BODY [x-test]". It answers each at
// once with 200 and its path as the body.
class Seen {
 public:
  HttpHandler Handler() {
    return [this](HttpRequest r, std::shared_ptr<HttpExchange> exchange) {
      {
        absl::MutexLock lock(&mu_);
        seen_.push_back(
            absl::StrCat(r.path, " ", r.body, " [", r.Header("x-test"), "]"));
      }
      exchange->Respond(200, {}, r.path);
    };
  }
  std::vector<std::string> Get() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

class FramingServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<HttpServer>> s =
        HttpServer::Start(std::move(options), seen_.Handler());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  // Sends `request` and a pipelined GET /smuggled in one write: `status`
  // must be the only answer, then the close; the handler saw nothing.
  void ExpectRefused(absl::string_view request, int status) {
    Client c(server_->port());
    ASSERT_TRUE(c.connected());
    c.Send(absl::StrCat(request, kSmuggled));  // may be cut short
    bool closed = false;
    const std::string answer = c.ReadToClose(&closed);
    EXPECT_TRUE(
        absl::StartsWith(answer, absl::StrCat("HTTP/1.1 ", status, " ")))
        << answer;
    EXPECT_EQ(answer.find("HTTP/1.1", 1), std::string::npos) << answer;
    EXPECT_TRUE(absl::StrContains(answer, "Connection: close")) << answer;
    EXPECT_TRUE(closed) << "the connection stayed open";
    EXPECT_EQ(seen_.Get(), std::vector<std::string>{});
  }

  // Sends `request` and a pipelined GET /smuggled: both are served, in
  // order, and the connection stays open.
  void ExpectServedThenSmuggled(absl::string_view request) {
    Client c(server_->port());
    ASSERT_TRUE(c.Send(absl::StrCat(request, kSmuggled)));
    EXPECT_EQ(c.ReadResponse(), "200 /a");
    EXPECT_EQ(c.ReadResponse(), "200 /smuggled");
  }

  Seen seen_;  // outlives the server, whose handler it is
  std::unique_ptr<HttpServer> server_;
};

std::string PostWith(absl::string_view fields, absl::string_view body = "",
                     absl::string_view version = "HTTP/1.1") {
  return absl::StrCat("POST /a ", version, "\r\nHost: t\r\n", fields, "\r\n",
                      body);
}

constexpr char kChunked[] = "Transfer-Encoding: chunked\r\n";
constexpr char kLastChunk[] = "0\r\n\r\n";

TEST_F(FramingServerTest, ContentLengthWithChunkedIs400) {
  ExpectRefused(PostWith("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                         kLastChunk),
                400);
  ExpectRefused(PostWith("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                         kLastChunk),
                400);
}

TEST_F(FramingServerTest, ContentLengthWithXchunkedIs400) {
  ExpectRefused(
      PostWith("Transfer-Encoding: xchunked\r\nContent-Length: 0\r\n"), 400);
}

TEST_F(FramingServerTest, UnknownCodingAloneIs400) {
  for (const char* coding : {"xchunked", "gzip", "identity"}) {
    SCOPED_TRACE(coding);
    ExpectRefused(PostWith(absl::StrCat("Transfer-Encoding: ", coding, "\r\n")),
                  400);
  }
}

TEST_F(FramingServerTest, GzipThenChunkedIs501) {
  ExpectRefused(PostWith("Transfer-Encoding: gzip, chunked\r\n", kLastChunk),
                501);
}

TEST_F(FramingServerTest, ChunkedThenIdentityIs400) {
  ExpectRefused(
      PostWith("Transfer-Encoding: chunked, identity\r\n", kLastChunk), 400);
}

TEST_F(FramingServerTest, ChunkedTwiceIs400) {
  ExpectRefused(PostWith("Transfer-Encoding: chunked, chunked\r\n", kLastChunk),
                400);
}

TEST_F(FramingServerTest, RepeatedTransferEncodingLinesAreOneList) {
  ExpectRefused(PostWith("Transfer-Encoding: gzip\r\nTransfer-Encoding: "
                         "chunked\r\n",
                         kLastChunk),
                501);
  ExpectRefused(PostWith("Transfer-Encoding: chunked\r\nTransfer-Encoding: "
                         "identity\r\n",
                         kLastChunk),
                400);
}

TEST_F(FramingServerTest, DifferentContentLengthsAre400) {
  ExpectRefused(PostWith("Content-Length: 3\r\nContent-Length: 30\r\n", "abc"),
                400);
  ExpectRefused(PostWith("Content-Length: 3, 30\r\n", "abc"), 400);
}

TEST_F(FramingServerTest, ObsFoldIs400) {
  ExpectRefused(PostWith("Transfer-Encoding: gzip\r\n chunked\r\n", kLastChunk),
                400);
  ExpectRefused(PostWith("Transfer-Encoding:\r\n chunked\r\n", kLastChunk),
                400);
  ExpectRefused(PostWith("X-Test: a\r\n\tb\r\n"), 400);
}

TEST_F(FramingServerTest, TransferEncodingInHttp10Is400) {
  ExpectRefused(PostWith(kChunked, kLastChunk, "HTTP/1.0"), 400);
}

TEST_F(FramingServerTest, LongChunkExtensionIs400) {
  // Over the extension limit, and over the whole read buffer.
  for (size_t size : {size_t{8} << 10, size_t{1} << 20}) {
    SCOPED_TRACE(size);
    ExpectRefused(
        PostWith(kChunked, absl::StrCat("5;x=", std::string(size, 'e'),
                                        "\r\nhello\r\n", kLastChunk)),
        400);
  }
}

TEST_F(FramingServerTest, ChunkedRequestThenPipelinedGetAreBothServed) {
  ExpectServedThenSmuggled(
      PostWith(kChunked, absl::StrCat("5\r\nhello\r\n", kLastChunk)));
  EXPECT_EQ(seen_.Get(),
            (std::vector<std::string>{"/a hello []", "/smuggled  []"}));
}

TEST_F(FramingServerTest, SmallChunkExtensionIsAccepted) {
  ExpectServedThenSmuggled(PostWith(
      kChunked, absl::StrCat("5;name=value;q=\"x y\"\r\nhello\r\n", "1;",
                             std::string(1000, 'e'), "\r\n!\r\n", kLastChunk)));
  EXPECT_EQ(seen_.Get(),
            (std::vector<std::string>{"/a hello! []", "/smuggled  []"}));
}

// RFC 9112 §7.1.2: trailer fields are not merged into the header section.
TEST_F(FramingServerTest, TrailerFieldsAreNotHeaders) {
  ExpectServedThenSmuggled(
      PostWith(absl::StrCat("X-Test: head\r\n", kChunked),
               "5\r\nhello\r\n0\r\nX-Test: trailer\r\nX-Other: t\r\n\r\n"));
  ExpectServedThenSmuggled(
      PostWith(kChunked, "5\r\nhello\r\n0\r\nX-Test: trailer\r\n\r\n"));
  EXPECT_EQ(seen_.Get(),
            (std::vector<std::string>{"/a hello [head]", "/smuggled  []",
                                      "/a hello []", "/smuggled  []"}));
}

TEST_F(FramingServerTest, ContentLengthRequestsStillWork) {
  ExpectServedThenSmuggled(PostWith("Content-Length: 5\r\n", "hello"));
  ExpectServedThenSmuggled(
      PostWith("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"));
}

}  // namespace
}  // namespace paceline::server::http
