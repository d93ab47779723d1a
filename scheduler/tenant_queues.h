#ifndef PACELINE_SCHEDULER_TENANT_QUEUES_H_
#define PACELINE_SCHEDULER_TENANT_QUEUES_H_

// The waiting requests, one queue per tenant, and the fair-share order in
// which they are admitted.
//
// Fair share: weighted virtual token counters (VTC; Sheng et al., "Fairness
// in Serving Large Language Models", OSDI 2024). Each tenant's counter grows
// by (prompt tokens × w_in + generated tokens × w_out) / weight as service
// is given: a request's prompt once, at its first admission (recomputation
// after a preemption is not charged, cached prefix tokens are), and each
// generated token as it is sampled (summed per step). Admission takes the
// next request of the admissible tenant with the smallest counter (ties:
// the tenant configured first). A tenant that becomes active again (it had
// nothing queued or running) is lifted to the smallest counter among the other
// active tenants — queued or running, since in continuous batching a tenant
// whose work is all running is still being served — so idle time banks no
// credit.
//
// Within a tenant: priority class (interactive, standard, batch), then FIFO.
// A preempted request goes back to the front of its class (and is not
// lifted: its tenant never stopped being active).
//
// Limits per tenant (TenantConfig): max_running (the tenant is not
// admissible while at it), max_queued (CheckQueueLimit refuses with
// RESOURCE_EXHAUSTED and a retry hint), tokens_per_minute (below).
//
// Token budget (tokens_per_minute; a token bucket, token_bucket.h, holding
// one minute's worth): a request is charged at admission for what it may
// cost, its reservation: prompt + max_tokens (Request::ReservationNeeded).
// Its tenant is admissible only while the bucket holds the reservation of
// the request at its front (FIFO: a smaller one behind it does not jump
// ahead), so a burst cannot overshoot; a reservation larger than the
// bucket waits for a full bucket and takes it into debt (so it never waits
// forever, and the debt is paid before the next admission). Pop takes
// the reservation; when the request finishes (its end, a stop, an error,
// a cancel) ReturnUnused gives back what it did not use — max_tokens less
// the tokens it generated, and its prompt if it never started — so the
// bucket is charged exactly what was served. Generated tokens are not
// charged again as they are sampled. A preempted request keeps its
// reservation while it waits and is readmitted without one (whatever the
// bucket holds); a queued request cancelled before admission reserved
// nothing. The fair-share counters are apart from this: ChargePrompt and
// ChargeGenerated add the service actually given, as it is given.
//
// Groups (scheduler_group.cc): a queued request counts with the children it
// holds (Request::group_size()) as waiting and against max_queued, and its
// tenant is admissible only with room under max_running for the whole
// group and with the whole group's reservation in the bucket (every
// choice's prompt + max_tokens); the children's reservations are taken
// with the parent's, and each member returns its own unused part.
//
// Cancelled requests: a queued request that is cancelled is finished at
// once by the scheduler (sink told, counters moved) but its entry stays in
// the queue and is dropped when it reaches the front (TGI's queue), counted
// per reason. So cancelled entries cannot pile up, a tenant whose dead
// entries outnumber max(64, live entries) is compacted on the spot (those
// are counted too).
//
// Thread-compatible: engine thread only.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/token_bucket.h"

namespace paceline::scheduler {

struct TenantConfig {
  std::string name;               // non-empty, unique
  double weight = 1.0;            // > 0: relative share of service
  int32_t max_running = 0;        // >= 0; 0 = no limit
  int32_t max_queued = 0;         // >= 0; 0 = no limit
  int64_t tokens_per_minute = 0;  // >= 0; 0 = no limit
};

struct FairShareWeights {
  double w_in = 1.0;   // per prompt token, > 0
  double w_out = 2.0;  // per generated token, > 0 (VTC's default ratio)
};

// How long a full queue asks a client to wait when the token bucket gives
// no better estimate.
inline constexpr absl::Duration kQueueFullRetryHint = absl::Seconds(1);

struct TenantStats {
  double counter = 0;  // the virtual token counter
  // Weighted service given: prompt × w_in + generated × w_out (not divided
  // by the weight).
  double service = 0;
  int64_t prompt_tokens = 0;     // charged (first admissions)
  int64_t generated_tokens = 0;  // sampled
  // Taken from the tokens-per-minute budget: reservations less what was
  // returned (counted when unlimited too). Once every admitted request
  // has finished: prompt_tokens + generated_tokens.
  int64_t budget_tokens = 0;
  int32_t waiting = 0;  // live queued requests
  int32_t running = 0;
  // Cancelled entries dropped from the queue, by CancelReason.
  int64_t skipped[kNumCancelReasons] = {};
};

class TenantQueues {
 public:
  // InvalidArgument naming the tenant for a bad config, duplicate names or
  // an empty list; `metrics` may be null and must outlive the queues.
  static absl::StatusOr<std::unique_ptr<TenantQueues>> Create(
      std::vector<TenantConfig> tenants, FairShareWeights weights,
      absl::Time now, SchedulerMetrics* metrics);

  TenantQueues(const TenantQueues&) = delete;
  TenantQueues& operator=(const TenantQueues&) = delete;

  int32_t num_tenants() const { return static_cast<int32_t>(tenants_.size()); }
  // The tenant's index, or -1.
  int32_t Find(absl::string_view name) const;
  const TenantConfig& config(int32_t tenant) const {
    return tenants_[tenant].config;
  }
  TenantStats stats(int32_t tenant) const { return tenants_[tenant].stats; }
  int32_t num_waiting() const { return num_waiting_; }

  // OK, or ResourceExhausted with a retry hint (retry_hint.h) when `n` more
  // requests would take the tenant past max_queued live requests queued.
  absl::Status CheckQueueLimit(int32_t tenant, absl::Time now, int32_t n = 1);
  // The retry hint of a full queue: until the tenant's token bucket holds
  // the reservation at the front of its queue, at least
  // kQueueFullRetryHint.
  absl::Duration QueueFullRetryHint(int32_t tenant, absl::Time now);

  // Queues a waiting request: at the back of its priority class (a new
  // request) or at the front (one preempted, or put back).
  void PushBack(std::unique_ptr<Request> request);
  void PushFront(std::unique_ptr<Request> request);
  // A queued request was finished by a cancel: it no longer counts as
  // waiting; its entry is dropped later (see the top).
  void OnCancelled(const Request& request);
  // `n` children left a queued parent (cancelled, or released to be queued
  // on their own): they no longer count as waiting with it.
  void OnHeldLeft(int32_t tenant, int32_t n);

  // The next request to admit, or nullptr: the admissible tenant with the
  // smallest counter, its best class, its oldest entry. Admissible: live
  // requests queued, under max_running, the token bucket holding the
  // reservation of that entry (see the top). Drops
  // the cancelled entries it meets. The request stays queued until Pop.
  // Tenants whose `skip` entry is true (by index; a shorter span skips
  // none) are passed over.
  Request* Peek(absl::Time now, absl::Span<const bool> skip = {});
  // Visits, for every admissible tenant, its live queued requests in the
  // order Peek would return them while its max_running leaves room for
  // them, its token bucket holds their reservations (taken one after
  // another) and `visit` returns true. Drops nothing.
  void ForEachAdmissible(absl::Time now,
                         absl::FunctionRef<bool(const Request&)> visit);
  // Removes the request Peek just returned and takes its reservation (and
  // its held children's) from its tenant's token bucket at `now`.
  std::unique_ptr<Request> Pop(Request* peeked, absl::Time now);

  // Whether Peek would return a request.
  bool HasAdmissible(absl::Time now);
  // The earliest time a tenant held back only by its token bucket becomes
  // admissible: when the bucket holds the reservation at its front (`now`
  // if some tenant is admissible); InfiniteFuture() if none.
  absl::Time NextAdmissibleTime(absl::Time now);
  // The tokens the tenant's bucket holds at `now` (negative: a debt;
  // INFINITY when unlimited).
  double BudgetLevel(int32_t tenant, absl::Time now);

  // Accounting, from the scheduler.
  void OnStarted(int32_t tenant);
  void OnStopped(int32_t tenant);
  // Fair share only (see the top): the service given.
  void ChargePrompt(int32_t tenant, int64_t tokens);
  void ChargeGenerated(int32_t tenant, int64_t tokens);
  // A request that finished (or a preempted one cancelled) gives back to
  // its tenant's bucket what its reservation did not use; nothing if it
  // held none. Call once it has stopped generating.
  void ReturnUnused(Request* request, absl::Time now);

  // Empties every queue: the live requests (for shutdown); cancelled
  // entries are dropped and counted.
  std::vector<std::unique_ptr<Request>> TakeAll();

 private:
  struct Tenant {
    TenantConfig config;
    std::deque<std::unique_ptr<Request>> queues[kNumPriorityClasses];
    int32_t dead = 0;  // cancelled entries still queued
    TokenBucket bucket;
    TenantStats stats;
  };

  TenantQueues(FairShareWeights weights, SchedulerMetrics* metrics,
               size_t num_tenants)
      : weights_(weights), metrics_(metrics), tenants_(num_tenants) {}

  bool Active(const Tenant& t) const {
    return t.stats.waiting > 0 || t.stats.running > 0;
  }
  bool Admissible(Tenant& t, absl::Time now);
  // The first live entry, or null; drops nothing.
  static const Request* FirstLive(const Tenant& t);
  // Whether max_running leaves room for the group at the front.
  bool HasRoom(const Tenant& t) const;
  // How long until the bucket holds the front entry's reservation.
  static absl::Duration TimeUntilFits(Tenant& t, absl::Time now);
  // Lifts a tenant becoming active to the smallest active counter.
  void Lift(int32_t tenant);
  void Charge(int32_t tenant, int64_t tokens, double w);
  // Drops the cancelled entries at the front of each class; returns the
  // first live entry of the best class.
  Request* Front(Tenant& t);
  void CountSkip(Tenant& t, const Request& dropped);
  void Compact(Tenant& t);

  // Constant after construction.
  const FairShareWeights weights_;
  SchedulerMetrics* const metrics_;

  std::vector<Tenant> tenants_;  // never resized (Tenant is not movable)
  int32_t num_waiting_ = 0;      // live, all tenants
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_TENANT_QUEUES_H_
