#ifndef PACELINE_SCHEDULER_SCHEDULER_H_
#define PACELINE_SCHEDULER_SCHEDULER_H_

// The continuous-batching scheduler: every step it plans one engine batch
// (Schedule) and applies the engine's logits to it (Update). Between the
// two, the serving loop runs Engine::CopyBlocks(plan.copies) and
// Engine::Forward(plan.batch), or Engine::ForwardAndSample when the plan
// has rows for the engine to sample (plan.sampling; see EngineSampling).
//
// A step (Schedule):
//   budgets: max_batched_tokens tokens, max_running sequences.
//   1. Running requests, in admission order — or, under overload (more
//      running requests than tokens), by priority class, then slack
//      (buffered undelivered tokens / pace, least first; unpaced = 0), then
//      arrival. (Admission never lets running requests outnumber the
//      budget, so overload comes from lowering it: set_max_batched_tokens.)
//      Each is granted the rest of its uncomputed tokens (a decode
//      token, or the rest of its prompt) but keeps one token of the budget
//      for each request after it, so a long prefill chunk never starves a
//      decode. If the pager cannot grow the request's blocks, running
//      requests are preempted by recompute — victim: lowest priority class,
//      then latest arrival, possibly the request itself — until it can:
//      the victim's lease is destroyed and it goes back to the front of its
//      tenant queue. A victim already granted tokens this step gives them
//      back.
//   2. Unless something was preempted (no blocks to spare), waiting
//      requests are admitted in fair-share order (tenant_queues.h) into the
//      leftover budget, each taking what it can of its prompt (chunked
//      prefill; the blocks of the whole prompt are allocated at admission,
//      its cached prefix counting as computed); a request whose blocks
//      cannot be allocated stays at the front of its queue and admission
//      stops.
// Update: for each scheduled request, its granted tokens become computed
// (the pager hears MarkComputed); a request whose grant reached its last
// token samples the next one, which passes the stop checks (request.h) and
// goes to its sink. A finished request's lease is destroyed at once.
//
// Rejected at submission, never left to hang: an unknown tenant, a bad
// prompt / sampling / stop parameter (InvalidArgument); prompt + max_tokens
// - 1 positions beyond the model's context (InvalidArgument) or beyond the
// whole KV pool (ResourceExhausted without a retry hint: it can never fit);
// a full tenant queue (ResourceExhausted with a retry hint).
//
// Cancellation takes effect at once: the lease is destroyed, the sink gets
// OnFinished(kCancelled), counters move.
//
// Threading: the engine thread owns the scheduler, its pager and its
// requests; every method is for that thread except CheckRequest. Cancel
// must not be called between Schedule and the matching Update.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/forward_batch.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "kvpager/kv_pager.h"
#include "scheduler/clock.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/tenant_queues.h"

namespace paceline::scheduler {

// Where a step's logits rows are sampled.
enum class EngineSampling {
  // In the engine when it samples on its device (Engine::samples_on_device:
  // only token ids come back), else on the host.
  kAuto,
  // In the engine whenever the request allows (tests: a CPU engine then
  // samples after Forward with the same rule).
  kAlways,
  // On the host: every row comes back as logits.
  kNever,
};

struct SchedulerOptions {
  // Tokens per step over all sequences; 0 = the engine's
  // max_tokens_per_step(), which is also the most allowed.
  int32_t max_batched_tokens = 0;
  // Requests running at once (holding K/V; at most one slice each per step).
  int32_t max_running = 256;
  std::vector<TenantConfig> tenants;  // at least one
  FairShareWeights fair_share;
  // Rows of requests without penalties or logprobs may be sampled by the
  // engine (engine/row_sampling.h: the host sampler's filters and draw with
  // exact integer masses, the same token on every backend); the others
  // always use the host sampler.
  EngineSampling engine_sampling = EngineSampling::kAuto;
};

// One request's part of a step.
struct ScheduledRequest {
  Request* request = nullptr;
  int32_t num_tokens = 0;   // granted: [num_computed, num_computed + n)
  int32_t logits_row = -1;  // its row of the step's logits, or -1
};

// What the engine runs this step. Produced by Schedule, valid until the next
// Schedule; consumed by Update.
struct StepPlan {
  engine::ForwardBatch batch;
  // Copy-on-write copies to run before the forward pass.
  std::vector<engine::BlockCopy> copies;
  // Parallel to batch.sequences.
  std::vector<ScheduledRequest> scheduled;
  int32_t num_logit_rows = 0;
  int32_t num_preempted = 0;
  // Per logit row when the engine samples (empty otherwise): in_engine rows
  // are for Engine::ForwardAndSample, the others come back as logits.
  std::vector<engine::RowSampling> sampling;
  int32_t num_engine_sampled = 0;  // in_engine rows

  bool empty() const { return scheduled.empty(); }
  // Empties the plan, keeping its buffers.
  void Clear();
};

struct SchedulerCounters {
  int64_t steps = 0;  // non-empty plans
  int64_t submitted = 0;
  int64_t rejected = 0;
  int64_t preemptions = 0;
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

  // Queues a request under `id` (unique among live requests; AlreadyExists
  // otherwise) and calls its sink's OnAccepted. Errors as listed at the
  // top; on error the sink is not called.
  absl::Status Submit(RequestId id, RequestSpec spec);

  // Finishes a queued or running request as cancelled. NotFound if it is
  // not live; FailedPrecondition between Schedule and Update.
  absl::Status Cancel(RequestId id, CancelReason reason = CancelReason::kClient);
  void CancelAll(CancelReason reason);

  // Plans the next step (see the top). An empty plan means nothing to run.
  const StepPlan& Schedule();
  // What the engine returned for a plan.
  struct StepOutput {
    // (num_logit_rows, n_vocab): row j for the j-th slice with
    // needs_logits; rows the engine sampled may hold anything.
    absl::Span<const float> logits;
    // (num_logit_rows) when plan.num_engine_sampled > 0: the engine's
    // token (ForwardAndSample) for each in_engine row.
    absl::Span<const int32_t> tokens;
  };
  // Applies the step's outcome, or the engine's error, which finishes
  // every request of the plan with kError. Precondition: `plan` is the one
  // the last Schedule returned.
  void Update(const StepPlan& plan, absl::StatusOr<StepOutput> output);
  // The same for a plan without engine-sampled rows: logits only.
  void Update(const StepPlan& plan,
              absl::StatusOr<absl::Span<const float>> logits);
  // The same for a failed step (`error` is not OK).
  void Update(const StepPlan& plan, const absl::Status& error);

  // Counts a submission refused before it reached Submit (the serving
  // loop's synchronous checks) and reports it to the metrics.
  void ReportRejected(absl::string_view tenant, absl::StatusCode code);

  // Whether Schedule would plan something now.
  bool HasRunnable();
  // When a request held back only by its tenant's token bucket becomes
  // admissible; InfiniteFuture() if none.
  absl::Time NextAdmissibleTime();

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
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
  // Whether plans may carry rows for the engine to sample.
  bool engine_samples() const { return engine_samples_; }
  const SchedulerCounters& counters() const { return counters_; }
  const TenantQueues& queues() const { return *queues_; }
  const kvpager::KvPager& pager() const { return *pager_; }
  Clock* clock() const { return clock_; }

 private:
  Scheduler(const SchedulerOptions& options, const engine::Engine& engine,
            const engine::Tokenizer* tokenizer, Clock* clock,
            SchedulerMetrics* metrics);

  // Schedule's helpers.
  void OrderRunning(int32_t budget);
  bool GrowLease(Request* r, int32_t num_tokens, int32_t* budget);
  Request* PickVictim() const;
  void Preempt(Request* victim, int32_t* budget);
  void Grant(Request* r, int32_t num_tokens, int32_t* budget);
  void AdmitWaiting(int32_t* budget);
  void BuildBatch();
  // Update's helpers.
  // Samples from `row`, or takes the engine's token (>= 0; negative: a
  // non-finite logit) when `engine_token` is given.
  void SampleNext(Request* r, absl::Span<const float> row,
                  const int32_t* engine_token, absl::Time now);
  void FinishRunning(Request* r, FinishReason reason, absl::Status status,
                     absl::Time now);
  std::unique_ptr<Request> TakeRunning(Request* r);

  // Constant after construction.
  const int32_t engine_max_tokens_;
  const int32_t max_running_;
  const int32_t vocab_size_;
  const int64_t context_length_;
  const int64_t pool_tokens_;
  const bool engine_samples_;  // rows go to the engine when they may
  const engine::Tokenizer* const tokenizer_;
  Clock* const clock_;
  SchedulerMetrics* const metrics_;
  absl::flat_hash_map<std::string, int32_t> tenant_index_;

  // Engine thread. The pager is declared first so it outlives every lease.
  std::unique_ptr<kvpager::KvPager> pager_;
  std::unique_ptr<TenantQueues> queues_;
  std::vector<std::unique_ptr<Request>> running_;  // admission order
  absl::flat_hash_map<RequestId, Request*> live_;  // queued and running
  int32_t max_batched_tokens_;
  uint64_t next_arrival_seq_ = 0;
  bool in_step_ = false;  // between Schedule and Update
  StepPlan plan_;
  std::vector<Request*> order_;  // this step's running order
  std::vector<kvpager::BlockCopy> pager_copies_;
  engine::SamplerScratch scratch_;
  std::vector<int64_t> generated_;  // this step's sampled tokens, by tenant
  SchedulerCounters counters_;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_SCHEDULER_H_
