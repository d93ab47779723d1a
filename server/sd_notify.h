#ifndef PACELINE_SERVER_SD_NOTIFY_H_
#define PACELINE_SERVER_SD_NOTIFY_H_

// systemd's service notification protocol (sd_notify(3)) without
// libsystemd: one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace paceline::server {

// Sends `state` — newline-separated assignments such as "READY=1",
// "STOPPING=1", "STATUS=loading model" — as one datagram to $NOTIFY_SOCKET:
// a filesystem path ("/run/systemd/notify") or, when it starts with '@', a
// name in the abstract namespace. Does nothing and returns OK when
// $NOTIFY_SOCKET is unset or empty (not started by systemd, or
// Type=simple). InvalidArgument when the variable is neither an absolute
// path nor '@name' or is too long for a socket address; Unavailable when
// the send fails. Reads the environment: do not call concurrently with
// setenv().
absl::Status SdNotify(absl::string_view state);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_SD_NOTIFY_H_
