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
// writes to a client itself. Views passed in (ids, samples) are
// valid only during the call. buffered_tokens() is read by the scheduler
// every step under overload, so it must be cheap (an atomic load).
//
// The identity and outcome types the calls carry (RequestId, AcceptInfo,
// FinishInfo, FinishReason, Usage, RequestTimings) are in request_types.h.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/sampling/sampler.h"
#include "scheduler/request_types.h"

namespace paceline::scheduler {

// One step's output of a request.
struct TokenDelta {
  // Token ids generated (one per step, or a step's accepted drafts). Their
  // text is the delivery side's to make (engine/tokenizer/text_output.h):
  // the engine thread never turns ids into text.
  absl::Span<const int32_t> ids;
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
  int32_t num_deltas_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<engine::SampleResult> samples_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  FinishInfo finish_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_TOKEN_SINK_H_
