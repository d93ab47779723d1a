#ifndef PACELINE_SERVER_LIBRARY_LOGS_H_
#define PACELINE_SERVER_LIBRARY_LOGS_H_

// What libprotobuf and gRPC core log on their own, rate-limited: both write
// a line for every request they cannot parse, so a client sending malformed
// messages (no key needed) could fill the log (1,000 requests wrote 223 KB
// in 0.7 s). Each library gets at most kLibraryLogLines lines per
// kLibraryLogWindow; the next line after a window with drops says how many
// were dropped. Fatal messages always pass.

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paceline::server {

inline constexpr int kLibraryLogLines = 10;
inline constexpr absl::Duration kLibraryLogWindow = absl::Seconds(10);

// A fixed-window line budget. Thread-safe.
class LogLimiter {
 public:
  LogLimiter(int max_lines, absl::Duration window)
      : max_lines_(max_lines), window_(window) {}

  // Whether a line at `now` may be written; *dropped is set to the lines
  // dropped since the last line written (to report before this one).
  bool Admit(absl::Time now, int64_t* dropped);

 private:
  const int max_lines_;
  const absl::Duration window_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int lines_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Routes libprotobuf's and gRPC core's logs to stderr through a LogLimiter
// each ("pacelined: libprotobuf: ..." / "pacelined: grpc: ..."). Call once,
// before any thread that may log starts.
void InstallLibraryLogLimits();

}  // namespace paceline::server

#endif  // PACELINE_SERVER_LIBRARY_LOGS_H_
