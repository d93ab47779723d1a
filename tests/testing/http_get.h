#ifndef PACELINE_TESTS_TESTING_HTTP_GET_H_
#define PACELINE_TESTS_TESTING_HTTP_GET_H_

// A minimal HTTP/1.0 GET over a loopback TCP socket, for tests that read a
// /metrics endpoint or Prometheus's API without curl.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace paceline::testing {

struct HttpResponse {
  int status = 0;       // 0: no connection or no valid status line
  std::string headers;  // the header lines, after the status line
  std::string body;     // after the headers
};

// Sends `request` as is to 127.0.0.1:port and reads the reply until the
// server closes the connection.
inline HttpResponse HttpRaw(int port, const std::string& request) {
  HttpResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string raw;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buf[8192];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) raw.append(buf, n);
    }
  }
  close(fd);
  // "HTTP/1.x NNN ..."
  if (raw.size() < 12 || raw.compare(0, 5, "HTTP/") != 0) return out;
  out.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  const size_t end = raw.find("\r\n\r\n");
  if (end != std::string::npos) out.body = raw.substr(end + 4);
  const size_t line_end = raw.find("\r\n");
  if (line_end != std::string::npos && end != std::string::npos) {
    out.headers = raw.substr(line_end + 2, end - line_end);
  }
  return out;
}

// GET http://127.0.0.1:port/target ("/path?query", already encoded).
inline HttpResponse HttpGet(int port, const std::string& target) {
  return HttpRaw(port, absl::StrCat("GET ", target,
                                    " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
}

// Percent-encodes everything but unreserved characters (RFC 3986).
inline std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A free loopback TCP port right now (another process may take it before
// it is used; good enough for a test's child process).
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_HTTP_GET_H_
