#include "tools/paceline/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace paceline::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr uint32_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kReadPiece = 16 * 1024;

// "[::1]" for an IPv6 host, the host itself otherwise.
std::string HostForm(const std::string& host) {
  return host.find(':') == std::string::npos ? host
                                             : absl::StrCat("[", host, "]");
}

absl::Status ErrorOf(const beast::error_code& ec, absl::string_view doing) {
  if (ec == beast::error::timeout) {
    return absl::DeadlineExceededError(absl::StrCat(doing, ": timed out"));
  }
  if (ec.category() ==
          http::make_error_code(http::error::need_more).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return absl::InvalidArgumentError(
        absl::StrCat(doing, ": not an HTTP/1.1 answer: ", ec.message()));
  }
  return absl::UnavailableError(absl::StrCat(doing, ": ", ec.message()));
}

// The server closed a kept-alive connection before answering: send again.
bool ClosedMeanwhile(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == ssl::error::stream_truncated;
}

}  // namespace

std::string HttpUrl::ToString() const {
  return absl::StrCat(tls ? "https://" : "http://", HostForm(host), ":", port,
                      prefix);
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--url wants http://HOST[:PORT][/PREFIX], got '", url, "': ", why));
  };
  absl::string_view rest = url;
  HttpUrl out;
  out.tls = absl::StartsWithIgnoreCase(rest, "https://");
  if (!out.tls && !absl::StartsWithIgnoreCase(rest, "http://")) {
    return bad("not http:// or https://");
  }
  rest.remove_prefix(out.tls ? 8 : 7);
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return bad("a query or fragment");
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path =
      slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != absl::string_view::npos) return bad("user info");
  absl::string_view port;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("an unclosed '['");
    out.host = std::string(authority.substr(0, close));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !absl::ConsumePrefix(&authority, ":")) {
      return bad("junk after ']'");
    }
    port = authority;
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
    if (port.find(':') != absl::string_view::npos) {
      return bad("an IPv6 host wants brackets");
    }
  }
  if (out.host.empty()) return bad("no host");
  int port_number = out.tls ? 443 : 80;
  if (!port.empty() || absl::EndsWith(authority, ":")) {
    if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
        port_number > 65535 ||
        !std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) {
      return bad("a port outside 1..65535");
    }
  }
  out.port = absl::StrCat(port_number);
  while (absl::ConsumeSuffix(&path, "/")) {
  }
  out.prefix = std::string(path);
  return out;
}

std::optional<std::string> HttpResponse::Header(absl::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return std::nullopt;
}

struct HttpConnection::Impl {
  Impl(HttpUrl u, const std::string& tls_ca) : url(std::move(u)) {
    if (url.tls) SetUpTls(tls_ca);
  }

  // The context of https connections: the peer's certificate verified
  // against `tls_ca` (PEM), else the system's roots.
  void SetUpTls(const std::string& tls_ca) {
    tls_context.emplace(ssl::context::tls_client);
    beast::error_code ec;
    tls_context->set_verify_mode(ssl::verify_peer, ec);
    if (!ec) {
      if (tls_ca.empty()) {
        tls_context->set_default_verify_paths(ec);
      } else {
        tls_context->load_verify_file(tls_ca, ec);
      }
    }
    if (ec) {
      tls_setup = absl::FailedPreconditionError(
          absl::StrCat("TLS trust ", tls_ca.empty() ? "(system roots)" : tls_ca,
                       ": ", ec.message()));
    }
  }

  bool open() const { return tcp.has_value() || tls.has_value(); }
  beast::tcp_stream& Lowest() {
    return tls ? beast::get_lowest_layer(*tls) : *tcp;
  }
  // Calls f with the open stream, TLS or plain.
  template <class F>
  void With(F f) {
    if (tls) {
      f(*tls);
    } else {
      f(*tcp);
    }
  }

  // Runs the io_context until the operation just started has completed
  // (each is the only work queued on it).
  void Run() {
    io.restart();
    io.run();
  }

  void Expire(std::optional<Clock::time_point> deadline) {
    if (deadline) {
      Lowest().expires_at(*deadline);
    } else {
      Lowest().expires_never();
    }
  }

  void Close() {
    if (open()) {
      // No TLS close_notify: the client is done either way.
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      Lowest().close();
    }
    tls.reset();
    tcp.reset();
    buffer.clear();
  }

  absl::Status Connect(std::optional<Clock::time_point> deadline);
  http::request<http::string_body> Message(const HttpRequest& request) const;
  beast::error_code SendAndReadHead(
      http::request<http::string_body>& message,
      http::response_parser<http::buffer_body>& parser,
      std::optional<Clock::time_point> deadline);
  absl::StatusOr<HttpResponse> ReadBody(
      http::response_parser<http::buffer_body>& parser,
      std::optional<Clock::time_point> deadline, const BodySink& sink);

  const HttpUrl url;
  asio::io_context io;
  std::optional<ssl::context> tls_context;  // https only
  absl::Status tls_setup;                   // why tls_context is unusable
  // The open connection: one of the two, by the URL's scheme.
  std::optional<beast::tcp_stream> tcp;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
};

absl::Status HttpConnection::Impl::Connect(
    std::optional<Clock::time_point> deadline) {
  tcp::resolver resolver(io);
  beast::error_code ec;
  tcp::resolver::results_type results;
  resolver.async_resolve(
      url.host, url.port,
      [&](const beast::error_code& e, tcp::resolver::results_type r) {
        ec = e;
        results = std::move(r);
      });
  Run();
  const std::string where = url.ToString();
  if (ec) return ErrorOf(ec, absl::StrCat("resolving ", where));
  RETURN_IF_ERROR(tls_setup);
  beast::tcp_stream& s =
      url.tls ? beast::get_lowest_layer(tls.emplace(io, *tls_context))
              : tcp.emplace(io);
  Expire(deadline);
  s.async_connect(results, [&](const beast::error_code& e,
                               const tcp::endpoint&) { ec = e; });
  Run();
  if (ec) {
    Close();
    return ErrorOf(ec, absl::StrCat("connecting to ", where));
  }
  s.socket().set_option(tcp::no_delay(true), ec);
  if (!url.tls) return absl::OkStatus();
  // SNI, and the certificate must name the host.
  SSL_set_tlsext_host_name(tls->native_handle(), url.host.c_str());
  tls->set_verify_callback(ssl::host_name_verification(url.host));
  tls->async_handshake(ssl::stream_base::client,
                       [&](const beast::error_code& e) { ec = e; });
  Run();
  if (ec) {
    Close();
    return ErrorOf(ec, absl::StrCat("TLS handshake with ", where));
  }
  return absl::OkStatus();
}

http::request<http::string_body> HttpConnection::Impl::Message(
    const HttpRequest& request) const {
  http::request<http::string_body> m;
  m.method_string(request.method);
  m.target(absl::StrCat(url.prefix, request.target));
  m.version(11);
  m.set(http::field::host, absl::StrCat(HostForm(url.host), ":", url.port));
  m.set(http::field::user_agent, "paceline-bench");
  for (const auto& [name, value] : request.headers) m.set(name, value);
  if (!request.body.empty()) {
    m.set(http::field::content_type, "application/json");
    m.body() = request.body;
  }
  m.keep_alive(true);
  m.prepare_payload();
  return m;
}

beast::error_code HttpConnection::Impl::SendAndReadHead(
    http::request<http::string_body>& message,
    http::response_parser<http::buffer_body>& parser,
    std::optional<Clock::time_point> deadline) {
  beast::error_code ec;
  Expire(deadline);
  With([&](auto& s) {
    http::async_write(s, message,
                      [&](const beast::error_code& e, size_t) { ec = e; });
  });
  Run();
  if (ec) return ec;
  With([&](auto& s) {
    http::async_read_header(
        s, buffer, parser, [&](const beast::error_code& e, size_t) { ec = e; });
  });
  Run();
  return ec;
}

absl::StatusOr<HttpResponse> HttpConnection::Impl::ReadBody(
    http::response_parser<http::buffer_body>& parser,
    std::optional<Clock::time_point> deadline, const BodySink& sink) {
  HttpResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    const auto name = field.name_string();
    const auto value = field.value();
    response.headers.emplace_back(
        absl::AsciiStrToLower(absl::string_view(name.data(), name.size())),
        std::string(value.data(), value.size()));
  }
  const bool streamed = sink && response.status / 100 == 2;
  char piece[kReadPiece];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    beast::error_code ec;
    Expire(deadline);
    With([&](auto& s) {
      http::async_read_some(
          s, buffer, parser,
          [&](const beast::error_code& e, size_t) { ec = e; });
    });
    Run();
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      Close();
      return ErrorOf(ec, absl::StrCat("reading from ", url.ToString()));
    }
    const size_t n = sizeof(piece) - parser.get().body().size;
    if (n == 0) continue;
    const absl::string_view got(piece, n);
    if (streamed) {
      if (!sink(got)) {
        Close();
        return absl::AbortedError("the reader stopped the stream");
      }
    } else if (response.body.size() < kMaxCollected) {
      absl::StrAppend(&response.body,
                      got.substr(0, kMaxCollected - response.body.size()));
    }
  }
  if (!parser.keep_alive()) Close();
  return response;
}

HttpConnection::HttpConnection(HttpUrl url, const std::string& tls_ca)
    : impl_(std::make_unique<Impl>(std::move(url), tls_ca)) {}

HttpConnection::~HttpConnection() { impl_->Close(); }

bool HttpConnection::is_open() const { return impl_->open(); }

absl::StatusOr<HttpResponse> HttpConnection::Exchange(
    const HttpRequest& request, std::optional<Clock::time_point> deadline,
    const BodySink& sink) {
  http::request<http::string_body> message = impl_->Message(request);
  for (int attempt = 0;; ++attempt) {
    const bool reused = impl_->open();
    if (!reused) RETURN_IF_ERROR(impl_->Connect(deadline));
    http::response_parser<http::buffer_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    // Streamed, so unbounded (the collected part is capped). Not
    // boost::none: Boost 1.74 compares a content length with it as larger.
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    const beast::error_code ec =
        impl_->SendAndReadHead(message, parser, deadline);
    if (!ec) return impl_->ReadBody(parser, deadline, sink);
    impl_->Close();
    if (reused && attempt == 0 && !parser.got_some() && ClosedMeanwhile(ec)) {
      continue;
    }
    return ErrorOf(ec, absl::StrCat(request.method, " ", impl_->url.ToString(),
                                    request.target));
  }
}

}  // namespace paceline::tools
