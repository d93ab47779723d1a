#include "metrics/exposer.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "metrics/metrics_impl.h"
#include "prometheus/collectable.h"
#include "prometheus/text_serializer.h"

// A small HTTP/1.1 server of our own rather than prometheus-cpp's civetweb
// exposer: civetweb starts its threads with 100 KiB stacks, and glibc
// refuses those (EINVAL) once the process carries more static TLS than
// that — libcublasLt alone has 94 KiB — so with the CUDA engine linked in,
// the exposer could not start. Scrapes are rare and small: one thread
// serves every connection from one poll loop (non-blocking sockets), so a
// client that connects and drips its request, or never reads the answer,
// holds nothing but its own connection, and only until its deadline.

namespace paceline::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
// A whole exchange (request in, answer out) gets this long; then the
// connection is closed, finished or not.
constexpr absl::Duration kExchangeDeadline = absl::Seconds(10);
// Connections open at once; one more closes the one nearest its deadline.
constexpr size_t kMaxConnections = 64;

std::string ErrnoText() { return std::strerror(errno); }

// "HOST:PORT" or "[V6HOST]:PORT" -> host, port; false when malformed.
bool SplitAddress(absl::string_view address, std::string* host,
                  std::string* port) {
  size_t colon;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return false;
    }
    *host = std::string(address.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == absl::string_view::npos) return false;
    *host = std::string(address.substr(0, colon));
  }
  *port = std::string(address.substr(colon + 1));
  int value = 0;
  return !host->empty() && absl::SimpleAtoi(*port, &value) && value >= 0 &&
         value <= 65535;
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", head ? "" : body);
}

// One client connection: its request as read so far, then its answer.
struct Connection {
  int fd = -1;
  absl::Time deadline;
  std::string in;
  std::string out;     // the answer, once the request is complete
  size_t sent = 0;     // bytes of `out` sent
  bool drain = false;  // after the answer, read (and drop) until EOF
  size_t drained = 0;
};

// The answer to a complete request (its head, up to the blank line).
std::string AnswerTo(absl::string_view request,
                     prometheus::Collectable& collectable) {
  const absl::string_view line =
      request.substr(0, request.find_first_of("\r\n"));
  const std::vector<absl::string_view> parts =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return Response("400 Bad Request", "text/plain", "bad request line\n",
                    false);
  }
  const bool head = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head) {
    return Response("405 Method Not Allowed", "text/plain",
                    "only GET and HEAD\n", false);
  }
  absl::string_view path = parts[1];
  path = path.substr(0, path.find('?'));
  if (path != "/metrics") {
    return Response("404 Not Found", "text/plain", "metrics are at /metrics\n",
                    head);
  }
  const std::string body =
      prometheus::TextSerializer().Serialize(collectable.Collect());
  return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body,
                  head);
}

}  // namespace

struct MetricsExposer::State {
  std::shared_ptr<prometheus::Collectable> collectable;  // the registry
  int listen_fd = -1;
  int stop_fd = -1;  // eventfd: written once to stop the thread
  std::thread thread;
  std::vector<Connection> connections;  // the serving thread's

  ~State() {
    if (thread.joinable()) {
      const uint64_t one = 1;
      (void)!write(stop_fd, &one, sizeof(one));
      thread.join();
    }
    for (const Connection& c : connections) close(c.fd);
    if (listen_fd >= 0) close(listen_fd);
    if (stop_fd >= 0) close(stop_fd);
  }

  void Serve() {
    std::vector<pollfd> fds;
    while (true) {
      fds.assign({{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}});
      absl::Time next = absl::InfiniteFuture();
      for (const Connection& c : connections) {
        const bool writing = !c.out.empty() && c.sent < c.out.size();
        fds.push_back(
            {c.fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0});
        next = std::min(next, c.deadline);
      }
      if (poll(fds.data(), fds.size(), TimeoutMs(next)) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      const absl::Time now = absl::Now();
      std::vector<Connection> kept;
      for (size_t i = 0; i < connections.size(); ++i) {
        Connection& c = connections[i];
        if (now < c.deadline && (fds[i + 2].revents == 0 || Progress(c))) {
          kept.push_back(std::move(c));
        } else {
          close(c.fd);
        }
      }
      connections = std::move(kept);
      if ((fds[0].revents & POLLIN) != 0) Accept(now);
    }
  }

  // poll's timeout until `deadline` (-1: none), rounded up.
  static int TimeoutMs(absl::Time deadline) {
    if (deadline == absl::InfiniteFuture()) return -1;
    return static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now()) + 1));
  }

  void Accept(absl::Time now) {
    const int fd =
        accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (connections.size() >= kMaxConnections) {
      const auto oldest = std::min_element(
          connections.begin(), connections.end(),
          [](const Connection& a, const Connection& b) {
            return a.deadline < b.deadline;
          });
      close(oldest->fd);
      connections.erase(oldest);
    }
    Connection c;
    c.fd = fd;
    c.deadline = now + kExchangeDeadline;
    connections.push_back(std::move(c));
  }

  // Reads or writes what the socket allows; false when the connection is
  // done (answered, closed by the client, or failed).
  bool Progress(Connection& c) {
    if (!c.out.empty() && c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent,
                             c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      c.sent += static_cast<size_t>(n);
      if (c.sent < c.out.size()) return true;
      if (!c.drain) return false;
      // Closing with unread input resets the connection, and the client
      // may lose the answer: read what it still sends (bounded) first.
      shutdown(c.fd, SHUT_WR);
      return true;
    }
    char buf[1024];
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;  // closed: nothing (more) to answer
    if (!c.out.empty()) {      // draining after a 431
      c.drained += static_cast<size_t>(n);
      return c.drained < 16 * kMaxRequestBytes;
    }
    c.in.append(buf, static_cast<size_t>(n));
    if (c.in.find("\r\n\r\n") != std::string::npos ||
        c.in.find("\n\n") != std::string::npos) {
      c.out = AnswerTo(c.in, *collectable);
    } else if (c.in.size() >= kMaxRequestBytes) {
      c.out = Response("431 Request Header Fields Too Large", "text/plain",
                       "request too large\n", false);
      c.drain = true;
    }
    return true;
  }
};

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    absl::string_view address, Metrics* metrics) {
  std::string host, port;
  if (!SplitAddress(address, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot serve metrics on ", address, ": want HOST:PORT or [V6]:PORT"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", gai_strerror(rc)));
  }
  auto state = std::make_unique<State>();
  state->collectable = metrics->impl_->collectable;
  // IPv4 first: where "localhost" resolves to ::1 before 127.0.0.1, binding
  // ::1 alone would miss scrapers pointed at 127.0.0.1 (the usual target).
  std::vector<addrinfo*> candidates;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    candidates.push_back(ai);
  }
  std::stable_partition(
      candidates.begin(), candidates.end(),
      [](const addrinfo* ai) { return ai->ai_family == AF_INET; });
  std::string error = "no address";
  for (addrinfo* ai : candidates) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = ErrnoText();
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = ErrnoText();
      close(fd);
      continue;
    }
    state->listen_fd = fd;
    break;
  }
  freeaddrinfo(found);
  if (state->listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(state->listen_fd, reinterpret_cast<sockaddr*>(&bound),
                  &len) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", ErrnoText()));
  }
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  state->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (state->stop_fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot serve metrics: eventfd: ", ErrnoText()));
  }
  State* s = state.get();
  state->thread = std::thread([s] { s->Serve(); });
  return std::unique_ptr<MetricsExposer>(
      new MetricsExposer(std::move(state), bound_port));
}

MetricsExposer::MetricsExposer(std::unique_ptr<State> state, int port)
    : state_(std::move(state)), port_(port) {}

MetricsExposer::~MetricsExposer() = default;

}  // namespace paceline::metrics
