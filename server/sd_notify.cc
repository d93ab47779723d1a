#include "server/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace paceline::server {

absl::Status SdNotify(absl::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  const absl::string_view name = env;

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name[0] != '/' && name[0] != '@') {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET '", name,
                     "' is neither an absolute path nor an @abstract name"));
  }
  // A path needs room for its terminating NUL; an abstract name has none
  // (its leading '@' becomes the leading NUL) and its length is the
  // address length.
  const bool abstract = name[0] == '@';
  if (name.size() + (abstract ? 0 : 1) > sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NOTIFY_SOCKET is ", name.size(), " characters, longer than a ",
        "socket address allows"));
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  if (abstract) addr.sun_path[0] = '\0';
  const auto addr_len = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + name.size() + (abstract ? 0 : 1));

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("sd_notify: socket: ", std::strerror(errno)));
  }
  ssize_t sent = -1;
  do {
    sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                  reinterpret_cast<const sockaddr*>(&addr), addr_len);
  } while (sent < 0 && errno == EINTR);
  const int send_errno = errno;
  close(fd);
  if (sent < 0) {
    return absl::UnavailableError(absl::StrCat(
        "sd_notify: sendto ", name, ": ", std::strerror(send_errno)));
  }
  if (static_cast<size_t>(sent) != state.size()) {
    return absl::UnavailableError(
        absl::StrCat("sd_notify: short send to ", name));
  }
  return absl::OkStatus();
}

}  // namespace paceline::server
