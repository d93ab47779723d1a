#ifndef PACELINE_SCHEDULER_SCHEDULER_METRICS_H_
#define PACELINE_SCHEDULER_SCHEDULER_METRICS_H_

// The narrow interface through which the scheduler and the serving loop
// report what happens (DESIGN.md §3: the lower modules know no Prometheus;
// metrics/ implements this and maps it onto its families). A plain
// observer: every call comes from the engine thread, synchronously, and
// must be cheap and non-blocking. Default implementations do nothing.
//
// Tenant names come from the configured (bounded) set; the views are valid
// only during the call.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "scheduler/request.h"
#include "scheduler/token_sink.h"

namespace paceline::scheduler {

// One engine step, as the serving loop saw it.
struct StepStats {
  absl::Duration schedule_time;  // Scheduler::Schedule
  // Engine::CopyBlocks + Engine::Forward (or ForwardAndSample).
  absl::Duration forward_time;
  // StepSampler::Sample + Scheduler::Update (host sampling, stop checks,
  // sinks).
  absl::Duration update_time;
  int32_t num_tokens = 0;     // tokens in the forward batch
  int32_t num_sequences = 0;  // slices in the batch
  int32_t num_sampled = 0;    // logits rows (tokens sampled)
  int32_t num_preempted = 0;  // preemptions while planning this step
  int32_t num_running = 0;    // after the step
  int32_t num_waiting = 0;    // after the step
};

class SchedulerMetrics {
 public:
  virtual ~SchedulerMetrics() = default;

  // --- Serving loop ------------------------------------------------------
  virtual void OnStep(const StepStats& stats) { (void)stats; }
  // After each step, once per configured tenant (gauges).
  virtual void OnTenantLoad(absl::string_view tenant, int32_t running,
                            int32_t waiting) {
    (void)tenant;
    (void)running;
    (void)waiting;
  }

  // --- Scheduler, per request ---------------------------------------------
  // A submission refused (InvalidArgument, ResourceExhausted, ...). The
  // tenant is as given (it may be unknown; then "" is passed).
  virtual void OnRejected(absl::string_view tenant, absl::StatusCode code) {
    (void)tenant;
    (void)code;
  }
  // First admission: time spent queued since arrival.
  virtual void OnAdmitted(absl::string_view tenant, absl::Duration queued) {
    (void)tenant;
    (void)queued;
  }
  // First token sampled: time to first token since arrival.
  virtual void OnFirstToken(absl::string_view tenant, absl::Duration ttft) {
    (void)tenant;
    (void)ttft;
  }
  // Every later token sampled: the time since the request's previous token
  // (inter-token latency; a preemption in between is part of it).
  virtual void OnNextToken(absl::string_view tenant,
                           absl::Duration since_previous) {
    (void)tenant;
    (void)since_previous;
  }
  virtual void OnPreempted(absl::string_view tenant) { (void)tenant; }
  // Every finish, any reason (info.reason), with usage and timings.
  virtual void OnFinished(absl::string_view tenant, const FinishInfo& info) {
    (void)tenant;
    (void)info;
  }
  // A cancelled entry dropped from a tenant queue.
  virtual void OnQueueSkip(absl::string_view tenant, CancelReason reason) {
    (void)tenant;
    (void)reason;
  }
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_SCHEDULER_METRICS_H_
