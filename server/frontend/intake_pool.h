#ifndef PACELINE_SERVER_FRONTEND_INTAKE_POOL_H_
#define PACELINE_SERVER_FRONTEND_INTAKE_POOL_H_

// The CPU work a request costs before it can queue for the engine: parsing
// what the transport did not, rendering a chat template, tokenizing (and
// the Tokenize / Detokenize RPCs, which are nothing else). It runs here, on
// a few threads of its own, never on an RPC or HTTP thread: a tenant
// sending megabytes of text keeps at most these threads busy, and every
// other RPC (a status query, another tenant's cancel) is answered at once.
//
// Charged to the tenant: each job's thread CPU time is added to its
// tenant's account, and the next job comes from the waiting tenant whose
// account, divided by its weight, is smallest (a tenant coming back from
// idle starts level with the last one served, so idling banks no credit).
// One tenant's burst therefore waits behind itself: another tenant's job
// waits for at most the jobs already running. Each tenant may have
// max_queued_per_tenant jobs waiting; past that Post refuses with
// RESOURCE_EXHAUSTED and a retry hint (scheduler/retry_hint.h).
//
// Stop (and the destructor) runs every job still queued, then joins: a job
// always runs, so the call it answers always ends.
//
// Thread-safe.

#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/clock.h"

namespace paceline::server {

class IntakeObserver {
 public:
  virtual ~IntakeObserver() = default;
  // One job of `tenant` ran: how long it waited, and the CPU time charged.
  virtual void OnIntakeJob(absl::string_view tenant, absl::Duration queued,
                           absl::Duration cpu) {
    (void)tenant;
    (void)queued;
    (void)cpu;
  }
};

struct IntakeOptions {
  int threads = 1;                     // >= 1
  int max_queued_per_tenant = 1024;    // >= 1
  IntakeObserver* observer = nullptr;  // optional; must outlive the pool
  // When a job was posted and started (the observer's `queued`).
  const scheduler::Clock* clock = scheduler::SystemClock::Get();
};

class IntakePool {
 public:
  using Job = absl::AnyInvocable<void() &&>;

  explicit IntakePool(IntakeOptions options);
  ~IntakePool();
  IntakePool(const IntakePool&) = delete;
  IntakePool& operator=(const IntakePool&) = delete;

  // Queues `job` for `tenant` (weight > 0; the weight a tenant was first
  // posted with is kept). RESOURCE_EXHAUSTED (with a retry hint) when the
  // tenant has max_queued_per_tenant jobs waiting; UNAVAILABLE
  // after Stop. A refused job is dropped without running.
  absl::Status Post(absl::string_view tenant, double weight, Job job);

  // Runs what is queued, then stops the threads. Idempotent.
  void Stop();

  // Jobs waiting (not running), all tenants.
  int64_t queued() const;
  // CPU time charged to `tenant` so far.
  absl::Duration charged(absl::string_view tenant) const;

 private:
  struct Queued {
    Job job;
    absl::Time posted;
  };
  struct Account {
    double weight = 1;
    absl::Duration charged;
    double virtual_seconds = 0;  // charged / weight, floored on waking
    int64_t jobs_done = 0;
    std::deque<Queued> waiting;
    uint64_t last_served = 0;  // pick order, for ties
  };

  void ThreadMain();
  // The tenant to serve next (something waits).
  std::string PickLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a refused job of `a` should wait before trying again.
  absl::Duration RetryHintLocked(const Account& a) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const IntakeOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Account> accounts_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  double floor_ ABSL_GUARDED_BY(mu_) = 0;  // the last served account's
  uint64_t serves_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_INTAKE_POOL_H_
