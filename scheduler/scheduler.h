#ifndef PACELINE_SCHEDULER_SCHEDULER_H_
#define PACELINE_SCHEDULER_SCHEDULER_H_

// The continuous-batching scheduler: every step it plans one engine batch
// (Schedule) and applies the step's sampled tokens to it (Update). Between
// the two, the serving loop runs the engine on the plan (Engine::CopyBlocks
// of plan.copies and Engine::CopyStates of plan.state_copies, then
// Engine::Forward or ForwardAndSample) and the sampling stage
// (step_sampler.h) turns its output into StepTokens.
//
// The contract:
//   - A step holds at most max_batched_tokens tokens and max_running
//     sequences. Running requests come first and a decode is never cut; a
//     long prefill is chunked and leaves room for other tenants' prompts
//     (admission_reserve); waiting requests are admitted in fair-share
//     order (tenant_queues.h), each once its token budget holds prompt +
//     max_tokens.
//   - Out of KV blocks, running requests are preempted by recompute; a
//     request is preempted at most once, and readmitted only when it can
//     finish (scheduler.cc, PickVictim).
//   - Speculative drafts ride on small steps only and change no output
//     (scheduler.cc, AddDrafts).
//   - A group (OpenAI's `n`) is admitted whole and forks after its prompt
//     (scheduler_group.cc).
//   - A hybrid model (Engine::num_state_slots() > 0: DeltaNet layers with
//     a recurrent state per sequence): each running request's lease holds
//     a state slot (kvpager/kv_pager.h), which its slices name
//     (SequenceSlice::state_slot); max_running is at most the slots; a
//     fork's state is copied before the next step (plan.state_copies); a
//     preempted request's slot is freed with its blocks, and its recompute
//     from position 0 rebuilds the state (the engine zeroes the slot
//     there); the prefix cache is off. Speculation keeps a snapshot of
//     the state and goes back to it when a draft is rejected
//     (scheduler.cc, AddDrafts).
//   - Update makes granted tokens computed, runs the stop checks
//     (request.h) and hands sampled tokens to the sinks; a finished
//     request's blocks are freed and its unused reservation returned at
//     once.
//
// How a step is planned is written beside the code that does it
// (scheduler.cc, Schedule).
//
// Rejected at submission, never left to hang: an unknown tenant, a bad
// prompt / sampling / stop parameter (InvalidArgument); prompt + max_tokens
// - 1 positions beyond the model's context (InvalidArgument) or beyond the
// whole KV pool (InvalidArgument too: it can never fit, no retry helps);
// a full tenant queue (ResourceExhausted with a retry hint).
//
// Cancellation takes effect at once: the lease is destroyed, the sink gets
// OnFinished(kCancelled), counters move, and a running or preempted request
// (or a reserved child) gives back the reservation it did not use; a
// request cancelled before its admission reserved nothing.
//
// Threading: the engine thread owns the scheduler, its pager and its
// requests; every method is for that thread except CheckRequest. Cancel
// must not be called between Schedule and the matching Update.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "kvpager/kv_pager.h"
#include "scheduler/clock.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/step.h"
#include "scheduler/tenant_queues.h"

namespace paceline::scheduler {

// The most members of a group (OpenAI's n <= 16 is the caller's to map).
inline constexpr int32_t kMaxGroupSize = 16;

struct SchedulerOptions {
  // Tokens per step over all sequences; 0 = the engine's
  // max_tokens_per_step(), which is also the most allowed.
  int32_t max_batched_tokens = 0;
  // Requests running at once (holding K/V; at most one slice each per step).
  // On an engine with recurrent-state slots, at most its
  // num_state_slots() (the scheduler lowers it to that).
  int32_t max_running = 256;
  // The part of the token budget a prefill chunk leaves for other
  // tenants' prefills: of the requests after it and of those waiting (see
  // the top), in [0, 1); 0 = none.
  double admission_reserve = 0.5;
  // Speculative decoding (see the top): draft tokens join a step only
  // while its tokens stay within this many; 0 = no speculation.
  int32_t speculation_max_step_tokens = 4;
  // Hybrid models (an engine with state slots): at most this many
  // snapshots of cached prefixes' recurrent state, in slots no running
  // request holds (kvpager/kv_pager.h), so that the prefix cache serves
  // them; -1 = as many as the engine has slots, 0 = no prefix cache.
  int32_t state_snapshots = -1;
  std::vector<TenantConfig> tenants;  // at least one
  FairShareWeights fair_share;
};

struct SchedulerCounters {
  int64_t steps = 0;  // non-empty plans
  int64_t submitted = 0;
  int64_t rejected = 0;
  int64_t preemptions = 0;
  // Tokens recomputed after preemptions (the sum of the requests'
  // Usage::recomputed_tokens, counted at readmission).
  int64_t recomputed_tokens = 0;
  int64_t finished[kNumFinishReasons] = {};  // by FinishReason
};

class Scheduler {
 public:
  // Reads the engine's shape (block size, pool, step limit, vocabulary,
  // context) and creates the pager. `tokenizer` (EOS, text), `clock` and
  // `metrics` (may be null) must outlive the scheduler. InvalidArgument for
  // bad options.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      const SchedulerOptions& options, const engine::Engine& engine,
      const engine::Tokenizer* tokenizer, Clock* clock,
      SchedulerMetrics* metrics = nullptr);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // Cancels whatever is left (reason kShutdown), telling the sinks.
  ~Scheduler();

  // The checks of Submit that need no queue state (see the top). Safe to
  // call from any thread: it reads constants only.
  absl::Status CheckRequest(const RequestSpec& spec) const;
  // CheckRequest's part for RequestSpec::embed: FailedPrecondition when
  // the model has no pooling type or the engine returns no hidden rows
  // (the CUDA engine, for now); InvalidArgument for max_tokens
  // other than 1, drafts or forced tokens.
  absl::Status CheckEmbedding(const RequestSpec& spec) const;

  // Queues a request under `id` (unique among live requests; AlreadyExists
  // otherwise) and calls its sink's OnAccepted. Errors as listed at the
  // top; on error the sink is not called. The same as SubmitGroup of one.
  absl::Status Submit(RequestId id, RequestSpec spec);

  // The checks of SubmitGroup that need no queue state: CheckRequest of
  // each member, then InvalidArgument unless there are 1..kMaxGroupSize
  // members with one tenant, prompt, cache salt and priority and distinct
  // sinks, then ResourceExhausted (no retry hint) for a group larger than
  // the limits (see the top). Any thread: it reads constants only.
  absl::Status CheckGroup(absl::Span<const RequestSpec> specs) const;

  // Queues a group (see the top): specs[i] under ids[i] (as many ids as
  // specs, distinct, none live: AlreadyExists otherwise), then calls each
  // sink's OnAccepted in order. All or nothing: on error nothing is
  // queued and no sink is called; besides CheckGroup's errors, a full
  // queue is ResourceExhausted with a retry hint.
  absl::Status SubmitGroup(absl::Span<const RequestId> ids,
                           std::vector<RequestSpec> specs);

  // Finishes a queued or running request as cancelled. NotFound if it is
  // not live; FailedPrecondition between Schedule and Update.
  absl::Status Cancel(RequestId id,
                      CancelReason reason = CancelReason::kClient);
  void CancelAll(CancelReason reason);
  // Finishes a queued or running request as stopped by `stop_string`, which
  // the delivery side found in the text of its first `tokens` generated
  // tokens (Request::StopAtString). Errors as Cancel's.
  absl::Status StopAtString(RequestId id, std::string stop_string,
                            int32_t tokens);

  // Plans the next step (see the top). An empty plan means nothing to run.
  const StepPlan& Schedule();
  // Applies the step's outcome (see the top): `tokens` holds the sampling
  // stage's result for the plan the last Schedule returned (rows by logits
  // row). Precondition: called once after each Schedule (otherwise it does
  // nothing). Rows missing from an OK `tokens` fail the step (InternalError).
  void Update(const StepTokens& tokens);

  // Counts a submission refused before it reached Submit (the serving
  // loop's synchronous checks) and reports it to the metrics.
  void ReportRejected(absl::string_view tenant, absl::StatusCode code);

  // Whether Schedule would plan something now.
  bool HasRunnable();
  // When a request held back only by its tenant's token bucket becomes
  // admissible; InfiniteFuture() if none.
  absl::Time NextAdmissibleTime();

  // Running requests, with the children of running parents not yet forked
  // (they hold running slots).
  int32_t num_running() const {
    return static_cast<int32_t>(running_.size()) + num_reserved_;
  }
  int32_t num_waiting() const { return queues_->num_waiting(); }
  int32_t max_batched_tokens() const { return max_batched_tokens_; }
  // Changes the step's token budget from the next Schedule on (1 .. the
  // engine's max_tokens_per_step(); InvalidArgument otherwise), e.g. to cap
  // step latency. Admission never lets running requests outnumber the
  // budget, so this is how overload arises: the requests already running
  // then outnumber it, and decodes are ranked (see the top).
  absl::Status set_max_batched_tokens(int32_t tokens);
  int32_t max_running() const { return max_running_; }
  int32_t vocab_size() const { return vocab_size_; }
  const SchedulerCounters& counters() const { return counters_; }
  const TenantQueues& queues() const { return *queues_; }
  // The retry hint a full queue of `tenant` would give at `now`.
  absl::Duration QueueFullRetryHint(int32_t tenant, absl::Time now) {
    return queues_->QueueFullRetryHint(tenant, now);
  }
  // The tokens `tenant`'s tokens-per-minute budget holds now (negative: a
  // debt; INFINITY when unlimited).
  double BudgetLevel(int32_t tenant) {
    return queues_->BudgetLevel(tenant, clock_->Now());
  }
  const kvpager::KvPager& pager() const { return *pager_; }
  Clock* clock() const { return clock_; }

 private:
  Scheduler(const SchedulerOptions& options, const engine::Engine& engine,
            const engine::Tokenizer* tokenizer, Clock* clock,
            SchedulerMetrics* metrics);

  // Schedule's helpers.
  void OrderRunning(int32_t budget);
  // waiting_demand_ for this step (see the top).
  void PlanWaitingDemand();
  // demand_after_ for this step's order_ (see the top).
  void PlanPrefillDemand();
  // Whether `r`'s prompt, less its cached prefix, is longer than the
  // admission reserve: its prefill is a chunk that leaves room for others.
  bool LongerThanTheReserve(const Request& r) const;
  // The budget a request of `tenant` being admitted leaves for other
  // tenants' waiting prompts: their demand, up to the admission reserve.
  int32_t LeaveForOthers(int32_t tenant) const;
  // A request of `tenant` that needed `tokens` was admitted: its demand is
  // no longer waiting.
  void TakeWaitingDemand(int32_t tenant, int64_t tokens);
  int32_t AdmissionReserveTokens() const;
  // Whether `next` may be admitted now, blocks aside: room under
  // max_running for its group and room beside the block reserve.
  bool HasRoomFor(const Request& next) const;
  bool GrowLease(Request* r, int32_t num_tokens, int32_t* budget);
  // The victim when `self` cannot grow: never a readmitted request.
  Request* PickVictim(Request* self) const;
  // Preemption bound (see the top): a request preempted before, running
  // again on the reserve.
  static bool IsReadmitted(const Request& r) { return r.preemptions() > 0; }
  // The blocks `r` holds when it has computed all it can: prompt +
  // max_tokens - 1 positions.
  int32_t BlocksToFinish(const Request& r) const;
  // The most blocks a sequence of `positions` positions holds at once over
  // the engine's KV groups (KvPager::BlocksToHold; constants only, so any
  // thread may ask).
  int64_t BlocksToHold(int64_t positions) const;
  // Blocks the pager can still hand out: free + evictable cached.
  int64_t AvailableBlocks() const;
  void Preempt(Request* victim, int32_t* budget);
  void Grant(Request* r, int32_t num_tokens, int32_t* budget);
  void AdmitWaiting(int32_t* budget);
  // Starts `r` on `lease`; charges its prompt to fair share at its first
  // admission (its token budget was reserved by TenantQueues::Pop, or with
  // its parent's).
  void StartRequest(Request* r, kvpager::BlockLease lease, absl::Time now);
  // What Schedule may grant `r`: its uncomputed tokens, or for a parent
  // holding children, those its lease covers (up to the fork point).
  static int32_t MaxGrant(const Request& r);
  // Hybrid models with prefix snapshots: `n` tokens of `r`'s prompt cut
  // so that a chunk ends where the prompt's last whole block does (the
  // state there is kept for the prefix cache).
  int32_t SnapshotAlignedGrant(const Request& r, int32_t n) const;
  // After a step, keeps `r`'s state where its computed tokens end a block:
  // the prompt's last whole block, or (rolling, one per request) the last
  // one reached while generating.
  void KeepStateSnapshot(Request* r);
  // Group helpers (scheduler_group.cc; see the top).
  absl::Status CheckGroupShape(absl::Span<const RequestSpec> specs) const;
  absl::Status CheckGroupLimits(const RequestSpec& spec, int32_t n) const;
  // The tokens a request's lease covers at admission.
  static absl::Span<const int32_t> AdmissionTokens(const Request& r);
  // A parent just admitted: its children take running slots; a 1-token
  // prompt's fork is at once. Returns the children started.
  std::vector<Request*> AdmitHeld(Request* parent, absl::Time now);
  // The fork point: every held child starts on a fork of the parent's
  // lease (or, for a 1-token prompt, a block of its own) or falls back.
  std::vector<Request*> ForkChildren(Request* parent, absl::Time now);
  // The fallback; call before the parent changes state.
  void ReleaseChildren(Request* parent);
  // Takes a held child from its parent (to cancel it), releasing its count.
  std::unique_ptr<Request> TakeHeld(Request* child);
  // Speculative decoding (see the top).
  void AddDrafts(int32_t* budget);
  // The draft tokens `r` can append: the rest of its last block, then free
  // blocks beside the reserve.
  int32_t DraftRoom(const Request& r) const;
  void BuildBatch();
  // Update's helpers.
  void TakeToken(Request* r, const SampledRow& row, absl::Time now);
  // An embedding request's step: pools its hidden rows, and finishes it
  // once its prompt is computed.
  void TakeHidden(Request* r, const ScheduledRequest& s, absl::Time now);
  // Whether `r` may take a state snapshot for drafts (AddDrafts): a free
  // slot beyond those the held children will fork into. True without
  // state slots.
  bool HasSnapshotRoom(const Request& r) const;
  // Appends the tokens r's token mask forces after its last (fast-forward).
  void FastForward(Request* r, absl::Time now);
  // A drafted request's rows: its sampled tokens while they match the
  // draft, then its lease truncated to what is computed (and with a
  // state snapshot, the state rolled back when a draft was rejected).
  void TakeDraftedTokens(Request* r, const ScheduledRequest& s,
                         const StepTokens& tokens, absl::Time now);
  void ChargeGenerated();
  void FinishRunning(Request* r, FinishReason reason, absl::Status status,
                     absl::Time now);
  // Cancel's and StopAtString's work: ends live request `id` as `end`
  // finishes it.
  absl::Status End(RequestId id,
                   const std::function<FinishInfo(Request&, absl::Time)>& end);
  std::unique_ptr<Request> TakeRunning(Request* r);

  // Constant after construction.
  const int32_t engine_max_tokens_;
  const int32_t max_running_;
  const int32_t vocab_size_;
  const engine::PoolingType pooling_;  // the model's (embedding requests)
  const bool returns_hidden_;          // Engine::returns_hidden()
  const int64_t n_embd_;
  const int64_t context_length_;
  const std::vector<int32_t> kv_group_windows_;  // Engine::kv_group_windows
  const int32_t block_size_;
  const int32_t num_blocks_;
  const double admission_reserve_;
  const int32_t speculation_max_step_tokens_;
  const engine::Tokenizer* const tokenizer_;
  Clock* const clock_;
  SchedulerMetrics* const metrics_;
  absl::flat_hash_map<std::string, int32_t> tenant_index_;

  // Engine thread. The pager is declared first so it outlives every lease.
  std::unique_ptr<kvpager::KvPager> pager_;
  std::unique_ptr<TenantQueues> queues_;
  std::vector<std::unique_ptr<Request>> running_;  // admission order
  int32_t num_reserved_ = 0;  // children of running parents, not forked
  absl::flat_hash_map<RequestId, Request*> live_;  // queued and running
  int32_t max_batched_tokens_;
  int32_t admission_reserve_tokens_ = 0;  // of max_batched_tokens_
  uint64_t next_arrival_seq_ = 0;
  bool in_step_ = false;  // between Schedule and Update
  // Within Schedule: the blocks readmitted running requests may still take
  // (BlocksToFinish - held), kept available for them.
  int64_t reserved_blocks_ = 0;
  StepPlan plan_;
  std::vector<Request*> order_;  // this step's running order
  // By tenant: the prompt tokens its waiting requests could take this
  // step, in its admission order up to about the reserve (each admission
  // takes its part off).
  std::vector<int64_t> waiting_demand_;
  int64_t waiting_demand_total_ = 0;
  // By order_ index: the prefill tokens other tenants' requests after it
  // and waiting could take this step, beyond one each.
  std::vector<int32_t> demand_after_;
  std::vector<int64_t> demand_by_tenant_;  // PlanPrefillDemand's scratch
  absl::InlinedVector<bool, 8> skipped_;   // AdmitWaiting's, by tenant
  std::vector<int64_t> generated_;  // this step's sampled tokens, by tenant
  std::vector<int32_t> draft_;      // AddDrafts' scratch
  std::vector<int32_t> forced_;     // FastForward's scratch
  // State copies of forks made by Update, for the next plan
  // (StepPlan::state_copies).
  std::vector<kvpager::StateCopy> pending_state_copies_;
  SchedulerCounters counters_;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_SCHEDULER_H_
