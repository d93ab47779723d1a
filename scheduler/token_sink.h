#ifndef PACELINE_SCHEDULER_TOKEN_SINK_H_
#define PACELINE_SCHEDULER_TOKEN_SINK_H_

// Where a request's output goes: the handoff from the engine thread to
// whoever delivers it (the server's pacer and gRPC reactor, the CLI, a
// test).
//
// Call order, per request: OnAccepted once, when the scheduler takes the
// request; OnTokens zero or more times; OnFinished exactly once, last. A
// submission the scheduler refuses synchronously (Scheduler::Submit and
// ServingLoop::Submit return the error) calls nothing; one the serving loop
// refuses later, at intake (a tenant's queue filled up meanwhile), gets
// OnFinished alone, with reason kError and the error status.
//
// Threading: every call comes from the engine thread. A sink must never
// block it: copy what it needs, hand it to another thread (a queue under a
// short mutex, a wake of the delivery thread), and return; it never
// writes to a client itself. Views passed in (ids, text, samples) are
// valid only during the call. buffered_tokens() is read by the scheduler
// every step under overload, so it must be cheap: an atomic
// load.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/sampling/sampler.h"

namespace paceline::scheduler {

using RequestId = uint64_t;

enum class FinishReason : int8_t {
  kStop,       // EOS / end-of-turn, a stop token id, or a stop string
  kLength,     // max_tokens generated
  kCancelled,  // cancelled by the client, or by shutdown
  kError,      // the engine or the sampler failed for this request
};
inline constexpr int kNumFinishReasons = 4;
absl::string_view FinishReasonName(FinishReason reason);

struct Usage {
  int32_t prompt_tokens = 0;
  // Tokens sampled, including an EOS or stop token that ended the request
  // (which is not delivered).
  int32_t completion_tokens = 0;
  // Prompt tokens whose K/V came from the prefix cache at first admission.
  int32_t cached_prompt_tokens = 0;
  // Times the request was preempted (its K/V dropped and recomputed).
  int32_t preemptions = 0;
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
};

// What the scheduler tells a sink when it takes the request.
struct AcceptInfo {
  RequestId id = 0;
  int32_t prompt_tokens = 0;
  // Leading prompt tokens the prefix cache holds right now (the request
  // may find more or fewer at admission; Usage has the final figure).
  int32_t cached_prompt_tokens = 0;
};

// One step's output of a request.
struct TokenDelta {
  // Token ids delivered (one per step; empty when only text is flushed at
  // the end).
  absl::Span<const int32_t> ids;
  // New UTF-8 text: complete characters only. Text that might begin a stop
  // string is held back until it is known not to; a matched stop string
  // and everything after it are not delivered (unless include_stop_str,
  // then the stop string is).
  absl::string_view text;
  // One per id when the request asked for logprobs, else empty.
  absl::Span<const engine::SampleResult> samples;
};

class TokenSink {
 public:
  virtual ~TokenSink() = default;

  virtual void OnAccepted(const AcceptInfo& info) = 0;
  virtual void OnTokens(const TokenDelta& delta) = 0;
  virtual void OnFinished(const FinishInfo& info) = 0;

  // Tokens generated but not yet delivered to the client (the pacer's
  // buffer); the scheduler ranks paced decodes by it under overload.
  virtual int64_t buffered_tokens() const { return 0; }
};

// Collects everything, for tests and the CLI. Thread-safe: the engine
// thread writes, any thread reads.
class CollectingSink final : public TokenSink {
 public:
  void OnAccepted(const AcceptInfo& info) override;
  void OnTokens(const TokenDelta& delta) override;
  void OnFinished(const FinishInfo& info) override;
  int64_t buffered_tokens() const override;

  // What buffered_tokens() reports (tests of slack ranking).
  void set_buffered_tokens(int64_t n);

  bool accepted() const;
  RequestId id() const;
  // Precondition: accepted().
  AcceptInfo accept_info() const;
  std::vector<int32_t> tokens() const;
  std::string text() const;
  // OnTokens calls so far.
  int32_t num_deltas() const;
  std::vector<engine::SampleResult> samples() const;
  bool finished() const;
  // Precondition: finished().
  FinishInfo finish() const;
  // Waits up to `timeout` for OnFinished; returns finished().
  bool WaitFinished(absl::Duration timeout) const;

 private:
  mutable absl::Mutex mu_;
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  AcceptInfo accept_info_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  std::string text_ ABSL_GUARDED_BY(mu_);
  int32_t num_deltas_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<engine::SampleResult> samples_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  FinishInfo finish_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_TOKEN_SINK_H_
