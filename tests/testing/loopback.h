#ifndef PACELINE_TESTS_TESTING_LOOPBACK_H_
#define PACELINE_TESTS_TESTING_LOOPBACK_H_

// Raw TCP on the loopback address, for tests that speak to a server byte
// by byte (framing, slow readers, clients that never read). Header-only.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace paceline::testing {

// A socket connected to 127.0.0.1:port, or -1. `rcvbuf` > 0 sets its
// receive buffer before connecting (the window a slow reader offers
// follows it).
inline int ConnectLoopback(int port, int rcvbuf = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `bytes`; false when the peer stopped taking them (closed,
// reset) first.
inline bool SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

enum class RecvResult { kData, kClosed, kTimeout };

// Appends to `*out` what arrives within `timeout`: kData, kClosed at EOF
// or a reset, kTimeout when nothing came.
inline RecvResult RecvSome(int fd, absl::Duration timeout, std::string* out) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
    return RecvResult::kTimeout;
  }
  char chunk[65536];
  const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
  if (n <= 0) return RecvResult::kClosed;
  out->append(chunk, static_cast<size_t>(n));
  return RecvResult::kData;
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_LOOPBACK_H_
