#ifndef PACELINE_SERVER_HTTP_HTTP_SERVER_H_
#define PACELINE_SERVER_HTTP_HTTP_SERVER_H_

// An asynchronous HTTP/1.1 server (Boost.Beast's parser on Boost.Asio,
// TLS through Asio's OpenSSL layer) that knows nothing of what it serves:
// it reads requests and hands each to a handler with an HttpExchange, the
// request's one answer — a whole response, or a chunked stream (SSE).
//
// Threads: `threads` run the io_context; no thread is held per connection,
// so thousands of long paced streams cost memory only (a connection's
// buffers and state). Each connection's work runs on its own strand; the
// handler runs there and must not block (it may hand work elsewhere and
// answer later, from any thread).
//
// Per connection, one request at a time: the next request (pipelined bytes
// wait in the buffer) is read only once the answer to the previous one is
// written, so answers go out in request order. While an answer is pending
// the connection keeps one read open, which is how a client that goes away
// is noticed at once (HttpExchange::SetOnClose).
//
// Limits, each with its status and the connection closed after it:
//   request line + headers over max_header_bytes  431
//   body over max_body_bytes (Content-Length or chunked)  413
//   a request not read within request_timeout of its first byte  408
//   a malformed request  400
//   a chunk's extensions over 4 KiB, or a chunk line or trailer section
//     over the read buffer (max_header_bytes + 4 KiB)  400
//   max_connections open: a new connection gets 503 with Retry-After: 1
// Framing (RFC 9112 §6; the rules are in http_framing.h), refused before
// any body byte is read, so no body can be taken for the next request:
//   Transfer-Encoding with Content-Length (either order)  400
//   Transfer-Encoding in HTTP/1.0  400
//   a final transfer coding other than chunked (`gzip`, `xchunked`,
//     `chunked, identity`), chunked twice, or a malformed list  400
//   a transfer coding before chunked (`gzip, chunked`): unimplemented  501
//   Content-Length values that differ, or not digits  400
//   obs-fold (a header line starting with SP or HTAB)  400
// Repeated Transfer-Encoding lines are one list. Trailer fields after a
// chunked body are dropped, never merged into the request's headers.
// A keep-alive connection idle (no request started) for idle_timeout is
// closed without a word. `Expect: 100-continue` is answered before the body
// is read (curl sends it for bodies over 1 KiB).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace paceline::server::http {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // "/v1/models?x=1"
  std::string path;    // the target up to '?'
  HttpHeaders headers;
  std::string body;
  // The first value of header `name` (case-insensitive); "" when absent.
  absl::string_view Header(absl::string_view name) const;
};

// One request's answer. Methods may be called from any thread, in this
// order: Respond once; or StartStream, any number of Write, then EndStream.
// After the connection closed, calls are dropped (Write's `done` gets
// false). Every callback runs on the connection's strand (never inside the
// call that registered it).
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // The whole answer: status, headers (Content-Length is added), body.
  // `done` (may be empty) runs once it is written (true) or failed (false).
  virtual void Respond(int status, HttpHeaders headers, std::string body,
                       std::function<void(bool ok)> done = {}) = 0;

  // A chunked answer (Transfer-Encoding: chunked): the status line and
  // headers go out with the first Write (or with EndStream).
  virtual void StartStream(int status, HttpHeaders headers) = 0;
  // Queues `data` as one chunk ("" writes nothing but still calls `done`).
  // Writes go out in call order; whatever is queued while a write is in
  // flight goes out together next. `done` runs when `data` was written.
  virtual void Write(std::string data, std::function<void(bool ok)> done) = 0;
  // The last chunk; `done` (may be empty) as for Respond.
  virtual void EndStream(std::function<void(bool ok)> done = {}) = 0;

  // `on_close` runs once if the connection closes before the answer is
  // written (the client went away, the server stopped). Set it at most
  // once, before answering.
  virtual void SetOnClose(std::function<void()> on_close) = 0;
};

// Called on the connection's strand for every request read; answers
// through the exchange (now or later).
using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<HttpExchange>)>;

// What an error answer's body is: the server's own refusals (400, 408, 413,
// 431, 503) ask the service how its errors look. Returns the body and its
// content type.
using HttpErrorBody = std::function<std::pair<std::string, std::string>(
    int status, absl::string_view message)>;

struct HttpServerOptions {
  std::string listen;  // HOST:PORT; port 0 = any free port
  // TLS: PEM texts (not paths). Without a certificate the server is plain.
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;  // set: clients must present a cert it signs
  int64_t max_header_bytes = 16 * 1024;
  int64_t max_body_bytes = 4 * 1024 * 1024;
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(60);
  int64_t max_connections = 4096;
  int threads = 1;
  // SO_SNDBUF of each accepted connection; 0 = the kernel's autotuning.
  int send_buffer_bytes = 0;
  HttpErrorBody error_body;  // empty: plain text
};

class HttpServer {
 public:
  // Binds and starts serving. InvalidArgument for a bad address or TLS
  // material, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, HttpHandler handler);
  virtual ~HttpServer() = default;

  // The bound port.
  virtual int port() const = 0;
  // Open connections (tests, metrics).
  virtual int64_t num_connections() const = 0;
  // Stops accepting, closes every connection (their exchanges' on_close
  // run), and joins the threads. Idempotent; the destructor calls it.
  virtual void Stop() = 0;
};

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_HTTP_SERVER_H_
