#include "server/http/http_server.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ip/address.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/strand.hpp"
#include "server/http/http_connection.h"

namespace paceline::server::http {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

absl::StatusOr<asio::ip::tcp::endpoint> ParseEndpoint(absl::string_view hp) {
  const size_t colon = hp.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(hp.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http listen address '", hp, "': want HOST:PORT"));
  }
  absl::string_view host = hp.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(std::string(host), ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http listen address '", hp, "': '", host, "' is not an IP address"));
  }
  return asio::ip::tcp::endpoint(address, static_cast<uint16_t>(port));
}

absl::StatusOr<std::unique_ptr<asio::ssl::context>> TlsContext(
    const HttpServerOptions& o) {
  if (o.cert_pem.empty()) return nullptr;
  auto ctx =
      std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  error_code ec;
  ctx->set_options(
      asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
          asio::ssl::context::no_tlsv1_1,
      ec);
  if (!ec) ctx->use_certificate_chain(asio::buffer(o.cert_pem), ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("http tls: certificate: ", ec.message()));
  }
  ctx->use_private_key(asio::buffer(o.key_pem), asio::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("http tls: private key: ", ec.message()));
  }
  if (!o.client_ca_pem.empty()) {
    ctx->add_certificate_authority(asio::buffer(o.client_ca_pem), ec);
    if (!ec) {
      ctx->set_verify_mode(
          asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
    }
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("http tls: client CA: ", ec.message()));
    }
  }
  return ctx;
}

class Server final : public HttpServer {
 public:
  explicit Server(std::shared_ptr<ServerShared> shared)
      : shared_(std::move(shared)),
        acceptor_(asio::make_strand(shared_->io)),
        work_(asio::make_work_guard(shared_->io)) {}
  ~Server() override { Stop(); }

  absl::Status Listen(const asio::ip::tcp::endpoint& endpoint) {
    error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", shared_->options.listen, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint(ec).port();
    return absl::OkStatus();
  }

  void Run() {
    Accept();
    const int n = std::max(1, shared_->options.threads);
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([shared = shared_] { shared->io.run(); });
    }
  }

  int port() const override { return port_; }
  int64_t num_connections() const override { return shared_->size(); }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    asio::post(acceptor_.get_executor(), [this] {
      error_code ignored;
      acceptor_.close(ignored);
    });
    std::vector<std::shared_ptr<ConnectionBase>> live = shared_->StopAdding();
    for (auto& c : live) c->PostClose();
    live.clear();
    work_.reset();
    // Let the closes run, then stop: exchanges held elsewhere may still
    // post, and must not keep the threads alive.
    asio::post(shared_->io, [shared = shared_] { shared->io.stop(); });
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    // What is still queued (closes, aborted reads) holds connections,
    // which hold the io_context: run it to break the cycle.
    shared_->DrainAfterStop();
  }

 private:
  void Accept() {
    acceptor_.async_accept(
        asio::make_strand(shared_->io),
        [this](error_code ec, asio::ip::tcp::socket socket) {
          if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
            return;
          }
          if (!ec && shared_->options.send_buffer_bytes > 0) {
            error_code ignored;  // a refused size leaves the kernel's
            socket.set_option(asio::socket_base::send_buffer_size(
                                  shared_->options.send_buffer_bytes),
                              ignored);
          }
          if (!ec) {
            const bool refuse =
                shared_->size() >= shared_->options.max_connections;
            StartConnection(shared_, std::move(socket), refuse);
          }
          Accept();
        });
  }

  const std::shared_ptr<ServerShared> shared_;
  asio::ip::tcp::acceptor acceptor_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

}  // namespace

bool ServerShared::Add(ConnectionBase* c, std::weak_ptr<ConnectionBase> weak) {
  absl::MutexLock lock(&mu);
  if (!adding) return false;
  live[c] = std::move(weak);
  return true;
}

void ServerShared::Remove(ConnectionBase* c) {
  absl::MutexLock lock(&mu);
  live.erase(c);
}

int64_t ServerShared::size() const {
  absl::MutexLock lock(&mu);
  return static_cast<int64_t>(live.size());
}

std::vector<std::shared_ptr<ConnectionBase>> ServerShared::StopAdding() {
  absl::MutexLock lock(&mu);
  adding = false;
  std::vector<std::shared_ptr<ConnectionBase>> out;
  for (auto& [raw, weak] : live) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

void ServerShared::DrainAfterStop() {
  {
    absl::MutexLock lock(&mu);
    stopped = true;
    draining = true;
  }
  Drain();
}

void ServerShared::Posted() {
  {
    absl::MutexLock lock(&mu);
    if (!stopped) return;
    if (draining) {
      more = true;
      return;
    }
    draining = true;
  }
  std::thread([self = shared_from_this()] { self->Drain(); }).detach();
}

void ServerShared::Drain() {
  for (;;) {
    io.restart();
    while (io.poll() > 0) {
    }
    absl::MutexLock lock(&mu);
    if (!more) {
      draining = false;
      return;
    }
    more = false;
  }
}

absl::string_view HttpRequest::Header(absl::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (absl::EqualsIgnoreCase(n, name)) return v;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, HttpHandler handler) {
  absl::StatusOr<asio::ip::tcp::endpoint> endpoint =
      ParseEndpoint(options.listen);
  if (!endpoint.ok()) return endpoint.status();
  absl::StatusOr<std::unique_ptr<asio::ssl::context>> tls = TlsContext(options);
  if (!tls.ok()) return tls.status();
  auto shared =
      std::make_shared<ServerShared>(std::move(options), std::move(handler));
  shared->tls = *std::move(tls);
  auto server = std::make_unique<Server>(shared);
  if (absl::Status st = server->Listen(*endpoint); !st.ok()) return st;
  server->Run();
  return server;
}

}  // namespace paceline::server::http
