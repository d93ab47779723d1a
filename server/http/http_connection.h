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
#include <utility>
#include <vector>

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
//
// After Stop has joined the threads, nothing runs the io_context, yet an
// exchange held elsewhere may still be called (and must hear done(false)):
// each such call is posted as usual and then Posted() starts a short-lived
// thread that drains the io_context, so its callbacks still run on the
// strand, in order, never inside the call.
struct ServerShared : std::enable_shared_from_this<ServerShared> {
  ServerShared(HttpServerOptions options, HttpHandler handler)
      : options(std::move(options)), handler(std::move(handler)) {}

  // Registers a connection; false once Stop has begun (close it then).
  bool Add(ConnectionBase* c, std::weak_ptr<ConnectionBase> weak);
  void Remove(ConnectionBase* c);
  int64_t size() const;
  // Stop's first step: no more Add; the connections open now.
  std::vector<std::shared_ptr<ConnectionBase>> StopAdding();
  // Stop's last step (the threads joined): runs what is queued, and from
  // now on Posted() drains what later calls post.
  void DrainAfterStop();
  // Called after every post from outside the strand (an exchange's call).
  void Posted();

  boost::asio::io_context io;
  const HttpServerOptions options;
  const HttpHandler handler;
  std::unique_ptr<boost::asio::ssl::context> tls;  // null: plain

 private:
  // Runs the io_context until it is empty and nothing more was posted.
  void Drain();

  mutable absl::Mutex mu;
  absl::flat_hash_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> live
      ABSL_GUARDED_BY(mu);
  bool adding ABSL_GUARDED_BY(mu) = true;
  bool stopped ABSL_GUARDED_BY(mu) = false;   // the threads are gone
  bool draining ABSL_GUARDED_BY(mu) = false;  // a Drain is running
  bool more ABSL_GUARDED_BY(mu) = false;      // posted during that Drain
};

// Starts serving `socket` (accepted on a strand of shared->io). `refuse`:
// answer 503 (too many connections) and close.
void StartConnection(std::shared_ptr<ServerShared> shared,
                     boost::asio::ip::tcp::socket socket, bool refuse);

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_HTTP_CONNECTION_H_
