#ifndef PACELINE_SCHEDULER_CONTEXT_LIMIT_H_
#define PACELINE_SCHEDULER_CONTEXT_LIMIT_H_

// A refusal because the request does not fit the model's context window
// (its prompt alone, or the prompt plus max_tokens): an INVALID_ARGUMENT
// marked with a payload, so that each API can name it its own way (OpenAI's
// code "context_length_exceeded") without parsing the message, which keeps
// the counts.

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace paceline::scheduler {

inline constexpr char kContextExceededPayload[] =
    "paceline.dev/context-length-exceeded";

// `status` (INVALID_ARGUMENT, saying the counts) marked as over the context.
inline absl::Status MarkContextExceeded(absl::Status status) {
  status.SetPayload(kContextExceededPayload, absl::Cord("1"));
  return status;
}

inline bool IsContextExceeded(const absl::Status& status) {
  return status.GetPayload(kContextExceededPayload).has_value();
}

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_CONTEXT_LIMIT_H_
