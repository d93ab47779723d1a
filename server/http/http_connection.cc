#include "server/http/http_connection.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/stream.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/read_size.hpp"
#include "boost/beast/core/stream_traits.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "server/http/http_framing.h"
#include "server/http/http_wire.h"

namespace paceline::server::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using Tcp = asio::ip::tcp::socket;
using Tls = asio::ssl::stream<Tcp>;
using Done = std::function<void(bool ok)>;

// Bytes read ahead while an answer is pending (a pipelined request).
constexpr size_t kReadChunk = 4096;
// Bytes read at most at once while the header is incomplete.
constexpr size_t kHeaderRead = 65536;
// A chunk's extensions (after its size, before its CRLF), at most. The
// read buffer holds max_header_bytes plus this much: a chunk line or a
// trailer section that does not fit is refused too (Beast would otherwise
// buffer a chunk line of any length).
constexpr size_t kMaxChunkExtensionBytes = 4096;
constexpr absl::string_view kChunkLineTooLong =
    "a chunk line (size and extensions) or the trailer section is too long "
    "(chunk extensions: at most 4096 bytes)";

using RequestParser = bhttp::request_parser<bhttp::string_body>;

absl::string_view View(boost::beast::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// The parser's chunk header callback: refuses long extensions (as
// buffer_overflow, which ReadFailed answers as kChunkLineTooLong).
struct ChunkExtensionLimit {
  void operator()(uint64_t, boost::beast::string_view extensions,
                  error_code& ec) {
    if (extensions.size() > kMaxChunkExtensionBytes) {
      ec = bhttp::error::buffer_overflow;
    }
  }
};

// CheckFraming over a parsed header. Beast must also frame the body as
// checked (its reading of the fields is not ours; the framing fuzzer checks
// that they agree): a disagreement is refused, never served.
FramingError CheckHeaderFraming(const RequestParser& parser) {
  FramingFields fields;
  fields.version = static_cast<int>(parser.get().version());
  for (const auto& f : parser.get()) {
    fields.Add(View(f.name_string()), View(f.value()));
  }
  FramingError error = CheckFraming(fields);
  const bool chunked = !fields.transfer_encoding.empty();
  const bool length = !chunked && !fields.content_length.empty();
  if (error.ok() && (parser.chunked() != chunked ||
                     parser.content_length().has_value() != length)) {
    return FramingError{400, "malformed HTTP request framing"};
  }
  return error;
}

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

template <class Stream>
class Connection;

// The exchange of one request: forwards to its connection's strand, where
// the connection drops calls for an exchange that is no longer current.
template <class Stream>
class Exchange final : public HttpExchange,
                       public std::enable_shared_from_this<Exchange<Stream>> {
 public:
  explicit Exchange(std::shared_ptr<Connection<Stream>> conn)
      : conn_(std::move(conn)) {}

  void Respond(int status, HttpHeaders headers, std::string body,
               Done done) override {
    Post([status, h = std::move(headers), b = std::move(body),
          d = std::move(done)](Connection<Stream>& c, Exchange* ex) mutable {
      c.DoRespond(ex, status, std::move(h), std::move(b), std::move(d));
    });
  }
  void StartStream(int status, HttpHeaders headers) override {
    Post([status, h = std::move(headers)](Connection<Stream>& c,
                                          Exchange* ex) mutable {
      c.DoStartStream(ex, status, std::move(h));
    });
  }
  void Write(std::string data, Done done) override {
    Post([d = std::move(data), f = std::move(done)](Connection<Stream>& c,
                                                    Exchange* ex) mutable {
      c.DoWrite(ex, std::move(d), std::move(f));
    });
  }
  void EndStream(Done done) override {
    Post([f = std::move(done)](Connection<Stream>& c, Exchange* ex) mutable {
      c.DoEndStream(ex, std::move(f));
    });
  }
  void SetOnClose(std::function<void()> on_close) override {
    Post(
        [f = std::move(on_close)](Connection<Stream>& c, Exchange* ex) mutable {
          c.DoSetOnClose(ex, std::move(f));
        });
  }

 private:
  // Runs f(connection, this) on the strand; both stay alive until then
  // (so the connection's "is this exchange current" check is exact).
  template <class F>
  void Post(F f) {
    std::shared_ptr<Connection<Stream>> conn = conn_;
    asio::post(conn->executor(),
               [conn, self = this->shared_from_this(),
                f = std::move(f)]() mutable { f(*conn, self.get()); });
    conn->Posted();
  }

  const std::shared_ptr<Connection<Stream>> conn_;
};

template <class Stream>
class Connection final
    : public ConnectionBase,
      public std::enable_shared_from_this<Connection<Stream>> {
 public:
  using Ex = Exchange<Stream>;

  Connection(std::shared_ptr<ServerShared> shared, Stream stream)
      : shared_(std::move(shared)),
        options_(shared_->options),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        buffer_(static_cast<size_t>(options_.max_header_bytes) +
                kMaxChunkExtensionBytes) {}

  asio::any_io_executor executor() { return stream_.get_executor(); }
  // After a post from outside the strand (see ServerShared).
  void Posted() { shared_->Posted(); }

  void PostClose() override {
    asio::post(executor(),
               [self = this->shared_from_this()] { self->Close(); });
  }

  void Start(bool refuse) {
    if (!shared_->Add(this, this->weak_from_this())) return Close();
    if constexpr (std::is_same_v<Stream, Tls>) {
      phase_ = Phase::kHandshake;
      ArmTimer(options_.request_timeout);
      stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self = this->shared_from_this(), refuse](error_code ec) {
            if (self->phase_ == Phase::kClosed) return;
            if (ec) return self->Close();
            self->AfterStart(refuse);
          });
    } else {
      AfterStart(refuse);
    }
  }

  // --- The exchange's calls, on the strand -------------------------------
  void DoRespond(Ex* ex, int status, HttpHeaders headers, std::string body,
                 Done done) {
    if (!Current(ex, &done)) return;
    Enqueue(WholeResponse(status, std::move(headers), body, close_after_),
            Finishing(std::move(done)));
  }
  void DoStartStream(Ex* ex, int status, HttpHeaders headers) {
    if (!Current(ex, nullptr)) return;
    head_ = ChunkedHead(status, std::move(headers), close_after_);
  }
  void DoWrite(Ex* ex, std::string data, Done done) {
    if (!Current(ex, &done)) return;
    Enqueue(TakeHead() + Chunk(data), std::move(done));
  }
  void DoEndStream(Ex* ex, Done done) {
    if (!Current(ex, &done)) return;
    Enqueue(TakeHead() + std::string(LastChunk()), Finishing(std::move(done)));
  }
  void DoSetOnClose(Ex* ex, std::function<void()> on_close) {
    if (ex != exchange_.get()) {
      // Closed already (or answered): the client is gone either way.
      if (phase_ == Phase::kClosed && ex == closed_exchange_) on_close();
      return;
    }
    on_close_ = std::move(on_close);
  }

 private:
  enum class Phase {
    kHandshake,
    kIdle,
    kReading,
    kHandling,
    kRefusing,
    kClosed
  };
  struct Pending {
    std::string data;
    Done done;
  };

  void AfterStart(bool refuse) {
    if (refuse) {
      return Refuse(503, "too many connections; try again shortly",
                    {{"Retry-After", "1"}});
    }
    WaitForRequest();
  }

  // --- Reading -------------------------------------------------------------
  void WaitForRequest() {
    phase_ = Phase::kIdle;
    if (buffer_.size() > 0) return ReadHeader();
    ArmTimer(options_.idle_timeout);
    if (!read_pending_) ReadSome();
  }

  // The idle wait or the watch read; OnRead decides by the phase. Nothing
  // when the buffer is full (it is empty whenever this is called).
  void ReadSome() {
    const size_t room = beast::read_size(buffer_, kReadChunk);
    if (room == 0) return;
    read_pending_ = true;
    stream_.async_read_some(
        buffer_.prepare(room),
        [self = this->shared_from_this()](error_code ec, size_t n) {
          self->OnRead(ec, n);
        });
  }

  void OnRead(error_code ec, size_t n) {
    read_pending_ = false;
    if (phase_ == Phase::kClosed) return;
    if (ec) return Close();  // idle, or the client left mid-answer
    buffer_.commit(n);
    // kHandling: a pipelined request; it waits for the answer.
    if (phase_ == Phase::kIdle) ReadHeader();
  }

  void ReadHeader() {
    phase_ = Phase::kReading;
    timed_out_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    parser_->on_chunk_header(chunk_extension_limit_);
    fold_checked_ = 0;
    ArmTimer(options_.request_timeout);
    // Posted: the handler never runs inside the call that finished the
    // previous answer.
    asio::post(executor(),
               [self = this->shared_from_this()] { self->ParseHeader(); });
  }

  // Beast's async_read_header by hand, so that the header's bytes are seen
  // before Beast parses them (it parses nothing until the whole header is
  // in): an obs-fold is refused, not unfolded.
  void ParseHeader() {
    if (phase_ == Phase::kClosed) return;
    error_code ec = bhttp::error::need_more;
    if (buffer_.size() > 0) {
      const auto bytes = buffer_.data();
      // From where the last look stopped: a header sent a byte at a time
      // is scanned once, not once a byte.
      if (HasObsFold(absl::string_view(static_cast<const char*>(bytes.data()),
                                       bytes.size()),
                     &fold_checked_)) {
        return Refuse(400, "obsolete line folding is not accepted");
      }
      const size_t consumed = parser_->put(bytes, ec);
      buffer_.consume(consumed);
      fold_checked_ -= std::min(consumed, fold_checked_);
    }
    // put (not eager) stops at the header's end or an error, or needs more.
    if (ec != bhttp::error::need_more) return OnHeader(ec);
    ReadMoreHeader();
  }

  void ReadMoreHeader() {
    // The timer may have fired while no read was open to cancel.
    if (timed_out_) return ReadFailed(asio::error::operation_aborted);
    const size_t room = beast::read_size(buffer_, kHeaderRead);
    if (room == 0) return ReadFailed(bhttp::error::header_limit);
    stream_.async_read_some(
        buffer_.prepare(room),
        [self = this->shared_from_this()](error_code ec, size_t n) {
          if (self->phase_ == Phase::kClosed) return;
          self->buffer_.commit(n);
          // As Beast's read: the client left mid-header.
          if (ec == asio::error::eof) ec = bhttp::error::partial_message;
          if (ec) return self->ReadFailed(ec);
          self->ParseHeader();
        });
  }

  void OnHeader(error_code ec) {
    if (ec) return ReadFailed(ec);
    const FramingError framing = CheckHeaderFraming(*parser_);
    if (!framing.ok()) return Refuse(framing.status, framing.message);
    const auto& msg = parser_->get();
    header_fields_ = static_cast<size_t>(std::distance(msg.begin(), msg.end()));
    const auto expect = msg[bhttp::field::expect];
    if (!parser_->is_done() &&
        absl::EqualsIgnoreCase(absl::string_view(expect.data(), expect.size()),
                               "100-continue")) {
      return Enqueue("HTTP/1.1 100 Continue\r\n\r\n", [this](bool ok) {
        if (ok) ReadBody();
      });
    }
    ReadBody();
  }

  void ReadBody() {
    if (phase_ == Phase::kClosed) return;
    if (parser_->is_done()) return Dispatch();
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](error_code ec, size_t) {
                        if (self->phase_ == Phase::kClosed) return;
                        if (ec) return self->ReadFailed(ec);
                        self->Dispatch();
                      });
  }

  void ReadFailed(error_code ec) {
    if (timed_out_) {
      return Refuse(408, "the request was not received in time");
    }
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, "the request's headers are too large");
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(413, "the request body is too large");
    }
    if (ec == bhttp::error::buffer_overflow) {
      return Refuse(400, kChunkLineTooLong);
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || !parser_->got_some()) {
      return Close();
    }
    Refuse(400, "malformed HTTP request");
  }

  void Dispatch() {
    CancelTimer();
    phase_ = Phase::kHandling;
    bhttp::request<bhttp::string_body> msg = parser_->release();
    parser_.reset();
    close_after_ = !msg.keep_alive();
    HttpRequest request;
    request.method = std::string(msg.method_string());
    request.target = std::string(msg.target());
    request.path = request.target.substr(0, request.target.find('?'));
    size_t left = header_fields_;  // then trailer fields, not merged
    for (const auto& field : msg) {
      if (left-- == 0) break;
      request.headers.emplace_back(std::string(field.name_string()),
                                   std::string(field.value()));
    }
    request.body = std::move(msg.body());
    exchange_ = std::make_shared<Ex>(this->shared_from_this());
    on_close_ = nullptr;
    if (buffer_.size() == 0 && !read_pending_) ReadSome();  // the watch
    shared_->handler(std::move(request), exchange_);
  }

  // --- Writing -------------------------------------------------------------
  // Whether `ex` may still write; if not, `*done` (may be null or empty)
  // is taken and hears false (posted). Left alone when it may.
  bool Current(Ex* ex, Done* done) {
    if (ex == exchange_.get() && phase_ == Phase::kHandling) return true;
    if (done != nullptr && *done) {
      asio::post(executor(), [d = std::move(*done)] { d(false); });
    }
    return false;
  }

  std::string TakeHead() { return std::exchange(head_, std::string()); }

  // `done`, then the exchange is over.
  Done Finishing(Done done) {
    return
        [this, self = this->shared_from_this(), d = std::move(done)](bool ok) {
          if (d) d(ok);
          if (ok) FinishExchange();
        };
  }

  void Enqueue(std::string data, Done done) {
    queue_.push_back(Pending{std::move(data), std::move(done)});
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    writing_ = true;
    out_.clear();
    in_flight_.clear();
    for (Pending& p : queue_) {
      out_ += p.data;
      in_flight_.push_back(std::move(p.done));
    }
    queue_.clear();
    auto self = this->shared_from_this();
    if (out_.empty()) {
      asio::post(executor(), [self] { self->OnWritten(error_code()); });
      return;
    }
    asio::async_write(stream_, asio::buffer(out_),
                      [self](error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(error_code ec) {
    writing_ = false;
    std::vector<Done> dones = std::move(in_flight_);
    in_flight_.clear();
    const bool ok = !ec && phase_ != Phase::kClosed;
    for (Done& d : dones) {
      if (d) d(ok);
    }
    if (!ok) return Close();
    if (!queue_.empty()) WriteNext();
  }

  void FinishExchange() {
    if (phase_ == Phase::kClosed) return;
    exchange_.reset();
    on_close_ = nullptr;
    if (close_after_) return Close();
    WaitForRequest();
  }

  // An error answer, then close.
  void Refuse(int status, absl::string_view message, HttpHeaders headers = {}) {
    CancelTimer();
    phase_ = Phase::kRefusing;
    std::string body(message);
    std::string type = "text/plain; charset=utf-8";
    if (options_.error_body)
      std::tie(body, type) = options_.error_body(status, message);
    headers.emplace_back("Content-Type", type);
    Enqueue(WholeResponse(status, std::move(headers), body, /*close=*/true),
            [self = this->shared_from_this()](bool) { self->Close(); });
  }

  // --- Timers and closing ------------------------------------------------
  void ArmTimer(absl::Duration after) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(ToChrono(after));
    timer_.async_wait([self = this->shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->OnTimer();
    });
  }
  void CancelTimer() {
    ++timer_gen_;
    timer_.cancel();
  }

  void OnTimer() {
    switch (phase_) {
      case Phase::kHandshake:
      case Phase::kIdle:
        return Close();
      case Phase::kReading: {
        timed_out_ = true;
        error_code ignored;
        beast::get_lowest_layer(stream_).cancel(ignored);
        return;
      }
      default:
        return;
    }
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    CancelTimer();
    error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_);
    socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    shared_->Remove(this);
    closed_exchange_ = exchange_.get();
    exchange_.reset();
    if (on_close_) std::exchange(on_close_, nullptr)();
    for (Pending& p : queue_) {
      if (p.done) asio::post(executor(), [d = std::move(p.done)] { d(false); });
    }
    queue_.clear();
  }

  const std::shared_ptr<ServerShared> shared_;
  const HttpServerOptions& options_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  Phase phase_ = Phase::kIdle;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  ChunkExtensionLimit chunk_extension_limit_;
  size_t header_fields_ = 0;  // the parsed message's fields before trailers
  size_t fold_checked_ = 0;   // the header's bytes HasObsFold has judged
  bool read_pending_ = false;
  bool timed_out_ = false;
  // The request being answered, and what closing tells it.
  std::shared_ptr<Ex> exchange_;
  const Ex* closed_exchange_ = nullptr;
  std::function<void()> on_close_;
  bool close_after_ = false;  // Connection: close, or HTTP/1.0
  std::string head_;          // a chunked answer's head, not yet written
  // Writes: queued, and the one in flight.
  std::deque<Pending> queue_;
  bool writing_ = false;
  std::string out_;
  std::vector<Done> in_flight_;
};

}  // namespace

void StartConnection(std::shared_ptr<ServerShared> shared,
                     boost::asio::ip::tcp::socket socket, bool refuse) {
  error_code ignored;
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  if (shared->tls != nullptr) {
    ServerShared* raw = shared.get();
    auto conn = std::make_shared<Connection<Tls>>(
        std::move(shared), Tls(std::move(socket), *raw->tls));
    conn->Start(refuse);
  } else {
    auto conn =
        std::make_shared<Connection<Tcp>>(std::move(shared), std::move(socket));
    conn->Start(refuse);
  }
}

}  // namespace paceline::server::http
