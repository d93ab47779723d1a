#ifndef PACELINE_SCHEDULER_RETRY_HINT_H_
#define PACELINE_SCHEDULER_RETRY_HINT_H_

// A retry hint on a RESOURCE_EXHAUSTED status: how long the client should
// wait before trying again. Carried as a status payload so the server can
// map it onto gRPC's RetryInfo / a retry-after header without parsing the
// message.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace paceline::scheduler {

// Payload URL; the value is the hint in whole milliseconds, in decimal.
inline constexpr char kRetryAfterPayload[] = "paceline.dev/retry-after-ms";

// ResourceExhausted(message + "; retry after N ms") with the payload.
inline absl::Status ResourceExhaustedWithRetry(absl::string_view message,
                                               absl::Duration retry_after) {
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(
      retry_after, absl::Milliseconds(1)));
  absl::Status status = absl::ResourceExhaustedError(
      absl::StrCat(message, "; retry after ", ms, " ms"));
  status.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(ms)));
  return status;
}

// The hint of a status made by ResourceExhaustedWithRetry, if any.
inline std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterPayload);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms)) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_RETRY_HINT_H_
