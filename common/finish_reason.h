#ifndef PACELINE_COMMON_FINISH_REASON_H_
#define PACELINE_COMMON_FINISH_REASON_H_

// Why a request ended: the project's one FinishReason (STYLE.md 16).
//
// It lives in common/ because the two modules that need it may not see each
// other (DESIGN.md §3): the scheduler decides it (scheduler/request_types.h
// re-exports it as scheduler::FinishReason), and metrics/ counts it
// (paceline_requests_total's finish_reason label). Both may include common/;
// neither may include the other. The metric's extra "eos" value is a flag
// on kStop that the server's adapter computes (metrics::FinishReasonLabel),
// not a second enum.

#include <cstdint>

#include "absl/strings/string_view.h"

namespace paceline {

enum class FinishReason : int8_t {
  kStop,       // EOS / end-of-turn, a stop token id, or a stop string
  kLength,     // max_tokens generated
  kCancelled,  // cancelled by the client, or by shutdown
  kError,      // the engine or the sampler failed for this request
};
inline constexpr int kNumFinishReasons = 4;

// "stop", "length", "cancelled", "error".
constexpr absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace paceline

#endif  // PACELINE_COMMON_FINISH_REASON_H_
