#ifndef PACELINE_COMMON_ECHO_H_
#define PACELINE_COMMON_ECHO_H_

// Client-sent text quoted back in an error message, bounded: a request
// may carry a name of megabytes, and an error (and the log line it may
// become) should stay short whatever was sent.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace paceline {

inline constexpr size_t kMaxEchoBytes = 64;

// `text` itself when it has at most `max_bytes` bytes; else its first bytes
// up to `max_bytes` (never splitting a UTF-8 sequence) followed by
// "... (N bytes)".
std::string Echo(absl::string_view text, size_t max_bytes = kMaxEchoBytes);

}  // namespace paceline

#endif  // PACELINE_COMMON_ECHO_H_
