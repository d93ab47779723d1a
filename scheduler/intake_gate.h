#ifndef PACELINE_SCHEDULER_INTAKE_GATE_H_
#define PACELINE_SCHEDULER_INTAKE_GATE_H_

// The serving loop's check of each tenant's max_queued on the submitting
// thread, so a full queue is refused at once (with the scheduler's retry
// hint) instead of after the engine's current step, and the inbox holds
// at most what the queues may: a 10x overload storm gets its refusals
// without waiting for the engine, and queues nothing it would refuse.
//
// It counts, per tenant, the waiting requests the engine thread last
// published (it publishes right after each step's admissions), plus those
// it has taken from the inbox since, plus those still in the inbox: the
// scheduler, too, queues everything it takes from the inbox before it
// admits any. Its own check (TenantQueues::CheckQueueLimit) stays the
// exact one. Thread-compatible: the serving loop calls it under its inbox
// mutex.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "scheduler/tenant_queues.h"

namespace paceline::scheduler {

class IntakeGate {
 public:
  explicit IntakeGate(const std::vector<TenantConfig>& tenants);

  // OK and counts `n` more requests of `tenant` as in the inbox; or
  // ResourceExhausted when they would take it past max_queued, with the
  // retry hint the scheduler gave at the last publication (less the time
  // since, at least kQueueFullRetryHint). Tenants without a limit, or
  // unknown (the scheduler refuses those), always pass.
  absl::Status Admit(absl::string_view tenant, int32_t n, absl::Time now);
  // The engine thread took the inbox: its requests are in flight until the
  // next publication.
  void OnInboxTaken();
  // What the engine thread publishes per tenant.
  struct Published {
    int32_t waiting = 0;
    absl::Time retry_at;  // when a full queue's retry hint ends
  };
  // The engine thread published each tenant (configured order): the
  // in-flight requests are in these counts now, running, or finished.
  void OnPublished(const std::vector<Published>& tenants);

 private:
  struct Tenant {
    std::string name;
    int32_t max_queued = 0;  // 0 = no limit
    int32_t waiting = 0;     // at the last publication
    absl::Time retry_at;     // at the last publication
    int32_t in_flight = 0;   // taken from the inbox since then
    int32_t in_inbox = 0;
  };
  std::vector<Tenant> tenants_;  // configured order
  absl::flat_hash_map<std::string, int32_t> index_;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_INTAKE_GATE_H_
