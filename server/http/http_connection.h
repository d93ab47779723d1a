#ifndef PACELINE_SERVER_HTTP_HTTP_CONNECTION_H_
#define PACELINE_SERVER_HTTP_HTTP_CONNECTION_H_

// One HTTP/1.1 connection of HttpServer (internal to server/http): reads a
// request, hands it to the handler with an exchange, writes the answer, and
// reads the next request only then. Every member runs on the socket's
// strand.
//
// Phases:
//   kHandshake ──TLS done──▶ kIdle
//   kIdle ──a first byte (or pipelined bytes waiting)──▶ kReading
//   kReading ──request read──▶ kHandling (handler called, a watch read open)
//   kHandling ──answer written, keep-alive──▶ kIdle
//   kReading ──timeout / too large / malformed──▶ kRefusing (error, close)
//   any ──peer gone, idle timeout, Stop, Connection: close──▶ kClosed
//
// The one read in flight is the idle wait for a request's first byte, or
// in kHandling the watch read (its error is the client going away; bytes
// it reads are a pipelined request and wait in the buffer, no more is read
// until the answer is written). The idle and request timeouts share one
// timer.

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "server/http/http_server.h"

namespace paceline::server::http {

class ConnectionBase {
 public:
  virtual ~ConnectionBase() = default;
  // Closes the connection (posted to its strand).
  virtual void PostClose() = 0;
};

// What every connection of one server shares. The io_context lives as long
// as any connection (exchanges held elsewhere keep theirs alive).
struct ServerShared {
  ServerShared(HttpServerOptions options, HttpHandler handler)
      : options(std::move(options)), handler(std::move(handler)) {}

  void Add(ConnectionBase* c, std::weak_ptr<ConnectionBase> weak) {
    absl::MutexLock lock(&mu);
    live[c] = std::move(weak);
  }
  void Remove(ConnectionBase* c) {
    absl::MutexLock lock(&mu);
    live.erase(c);
  }
  int64_t size() const {
    absl::MutexLock lock(&mu);
    return static_cast<int64_t>(live.size());
  }

  boost::asio::io_context io;
  const HttpServerOptions options;
  const HttpHandler handler;
  std::unique_ptr<boost::asio::ssl::context> tls;  // null: plain
  mutable absl::Mutex mu;
  absl::flat_hash_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> live
      ABSL_GUARDED_BY(mu);
};

// Starts serving `socket` (accepted on a strand of shared->io). `refuse`:
// answer 503 (too many connections) and close.
void StartConnection(std::shared_ptr<ServerShared> shared,
                     boost::asio::ip::tcp::socket socket, bool refuse);

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_HTTP_CONNECTION_H_
