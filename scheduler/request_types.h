#ifndef PACELINE_SCHEDULER_REQUEST_TYPES_H_
#define PACELINE_SCHEDULER_REQUEST_TYPES_H_

// A request's identity and outcome as the scheduler reports them: the id it
// is accepted under, what it used, when things happened, and why it ended.
// Plain values, copied freely; token_sink.h hands them to a request's sink.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/finish_reason.h"

namespace paceline::scheduler {

using RequestId = uint64_t;

// The one FinishReason (common/finish_reason.h), under the scheduler's
// name: the scheduler decides it, metrics/ counts it.
using ::paceline::FinishReason;
using ::paceline::FinishReasonName;
using ::paceline::kNumFinishReasons;

struct Usage {
  int32_t prompt_tokens = 0;
  // Tokens sampled, including an EOS or stop token that ended the request
  // (which is not delivered).
  int32_t completion_tokens = 0;
  // Prompt tokens whose K/V came from the prefix cache at first admission.
  int32_t cached_prompt_tokens = 0;
  // Times the request was preempted (its K/V dropped and recomputed).
  int32_t preemptions = 0;
  // Tokens whose K/V it lost to preemptions and had to compute again: at
  // each readmission, the tokens computed before the preemption that the
  // prefix cache did not keep.
  int32_t recomputed_tokens = 0;
  // Speculative decoding: draft tokens the engine ran for the request, and
  // how many of them it accepted (each accepted one is also a completion
  // token, produced without a step of its own).
  int32_t draft_tokens = 0;
  int32_t accepted_draft_tokens = 0;
  // Fast-forward: tokens the token mask forced, appended without sampling
  // (each also a completion token).
  int32_t forced_tokens = 0;
};

// InfinitePast() for a moment that never came.
struct RequestTimings {
  absl::Time arrival = absl::InfinitePast();          // accepted
  absl::Time first_scheduled = absl::InfinitePast();  // first admitted
  absl::Time first_token = absl::InfinitePast();      // first token sampled
  absl::Time finished = absl::InfinitePast();
};

struct FinishInfo {
  FinishReason reason = FinishReason::kStop;
  // OK for kStop and kLength; CANCELLED for a client cancel, UNAVAILABLE for
  // shutdown; the failure for kError.
  absl::Status status;
  // The stop string that matched (kStop by a stop string), else empty.
  std::string stop_string;
  // The EOS / stop token id that ended the request, else -1.
  int32_t stop_token = -1;
  Usage usage;
  RequestTimings timings;
  // An embedding request's pooled, L2-normalized vector (n_embd floats)
  // when it finished OK (reason kStop); empty otherwise.
  std::vector<float> embedding;
};

// What the scheduler tells a sink when it takes the request.
struct AcceptInfo {
  RequestId id = 0;
  int32_t prompt_tokens = 0;
  // Leading prompt tokens the prefix cache holds right now (the request
  // may find more or fewer at admission; Usage has the final figure).
  int32_t cached_prompt_tokens = 0;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_REQUEST_TYPES_H_
