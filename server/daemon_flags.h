#ifndef PACELINE_SERVER_DAEMON_FLAGS_H_
#define PACELINE_SERVER_DAEMON_FLAGS_H_

// pacelined's command line: a config file (--config) with flags over it.
// Thread-compatible (no shared state).

#include <span>
#include <string>
#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "paceline/v1/config.pb.h"

namespace paceline::server {

// `pacelined --help`: every flag.
extern const absl::string_view kDaemonUsage;

struct DaemonOptions {
  // The config to serve with: the --config file (if any), then the flags
  // over it, then ApplyDefaults; ValidateConfig passed. Unset when help.
  v1::ServerConfig config;
  std::string config_file;  // "" when no --config
  bool allow_root = false;  // --allow-root
  bool help = false;        // --help / -h: print kDaemonUsage, exit 0
};

// Parses the words after argv[0]. With --help, returns at once (nothing
// else is checked or read). Otherwise OK means a complete, valid config.
// InvalidArgument naming the flag for a bad flag value; errors from the
// config file carry FILE:LINE and the field path, and errors about a field
// a flag set name that flag (config.h ConfigSource). Reads the config file
// and checks the files it names.
absl::StatusOr<DaemonOptions> ParseDaemonFlags(
    std::span<const std::string> args);

// FailedPrecondition when the process runs as root (effective uid 0) and
// `allow_root` is false; OK otherwise.
absl::Status CheckNotRoot(bool allow_root);
// The same check for a given effective uid (for tests).
absl::Status CheckNotRootForUid(bool allow_root, uid_t euid);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_DAEMON_FLAGS_H_
