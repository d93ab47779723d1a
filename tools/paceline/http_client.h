#ifndef PACELINE_TOOLS_PACELINE_HTTP_CLIENT_H_
#define PACELINE_TOOLS_PACELINE_HTTP_CLIENT_H_

// A small blocking HTTP/1.1 client for `paceline bench --api openai`:
// one keep-alive connection (Boost.Beast over Asio; TCP, or TLS through
// Asio's OpenSSL layer), each
// exchange bounded by a deadline, a 2xx body handed over piece by piece
// as it arrives (for server-sent events), other bodies collected so their
// error can be read.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline::tools {

// "http[s]://HOST[:PORT][/PREFIX]": the server and the path every target
// is put under ("" or "/prefix", never a trailing '/'). HOST may be a
// bracketed IPv6 address. PORT defaults to 80 (443 for https).
struct HttpUrl {
  bool tls = false;  // https
  std::string host;  // without brackets
  std::string port;
  std::string prefix;
  // "http[s]://HOST:PORT/PREFIX", as it was understood.
  std::string ToString() const;
};

// InvalidArgument for anything but the form above: other schemes, user
// info, a query or a fragment, an empty host, a port outside 1..65535.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // the path (and query) under the URL's prefix
  HttpHeaders headers;
  std::string body;  // sent as application/json when non-empty
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;  // names in lower case, in the order received
  // The body of an answer that was not streamed (see Exchange).
  std::string body;
  // The first header named `name` (lower case); nullopt when absent.
  std::optional<std::string> Header(absl::string_view name) const;
};

// Called with each piece of a streamed body as soon as it is read;
// returning false stops the exchange (the connection is then closed).
using BodySink = std::function<bool(absl::string_view piece)>;

// One connection to one server, opened on first use and reopened when the
// server has closed it. Not thread-safe: one exchange at a time.
class HttpConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // For an https `url`, the server's certificate must chain to the PEM
  // certificates in `tls_ca` (the system's roots when empty) and name the
  // URL's host; an unreadable `tls_ca` fails every exchange
  // (FailedPrecondition).
  explicit HttpConnection(HttpUrl url, const std::string& tls_ca = "");
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends `request` and reads the answer, all before `deadline` (none:
  // unbounded). A 2xx body goes to `sink` as it arrives when one is given
  // (the response's body stays empty); any other body is collected into
  // the response, its first `kMaxCollected` bytes kept. A kept-alive
  // connection the server closed meanwhile is reopened and the request
  // sent again, once, when nothing of the answer had come. Errors:
  // DeadlineExceeded past the deadline, Unavailable when the server cannot
  // be reached or the connection fails, Aborted when `sink` stopped it,
  // InvalidArgument for an answer that is not HTTP/1.1. After an error the
  // connection is closed (the next exchange reopens it).
  absl::StatusOr<HttpResponse> Exchange(
      const HttpRequest& request, std::optional<Clock::time_point> deadline,
      const BodySink& sink = nullptr);

  // Whether the last exchange left the connection open for another.
  bool is_open() const;

  static constexpr size_t kMaxCollected = 1 << 20;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_HTTP_CLIENT_H_
