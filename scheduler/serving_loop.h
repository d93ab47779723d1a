#ifndef PACELINE_SCHEDULER_SERVING_LOOP_H_
#define PACELINE_SCHEDULER_SERVING_LOOP_H_

// The engine thread: it owns the engine, the scheduler (and through it
// the pager and every request) and the sampling stage, and runs the step
// loop, four stages (step.h has the values between them):
//
//   plan   = scheduler.Schedule();          // what to run
//   output = Forward(plan);                 // Engine::CopyBlocks and
//                                           // CopyStates, then Forward —
//                                           // or ForwardAndSample
//                                           // for sampler.EngineRows(plan)
//   tokens = sampler.Sample(plan, output);  // a token or error per row
//   scheduler.Update(tokens);               // stop, sinks, free
//
// An engine error reaches Update as the step's status and finishes every
// request of the plan with kError.
//
// Other threads talk to it only through a mutex-protected inbox:
// Submit and Cancel enqueue a command and wake the thread, which applies
// the inbox before planning each step. When nothing is runnable (no
// running request, nothing admissible) the thread sleeps on a condition
// variable — until a command arrives, or until a tenant's token bucket lets
// a queued request in. It never spins.
//
// Outputs go to each request's TokenSink from the engine thread (token
// deltas and the finish); metrics go to SchedulerMetrics, once per step
// plus the scheduler's per-request events.
//
// Two ways to drive it: Start() a thread (the daemon), or call RunOnce /
// RunUntilIdle on the caller's thread without starting one (tests, the
// offline runner). Not both.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "kvpager/pager_stats.h"
#include "scheduler/clock.h"
#include "scheduler/intake_gate.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/step.h"
#include "scheduler/step_sampler.h"

namespace paceline::scheduler {

struct ServingLoopOptions {
  SchedulerOptions scheduler;
  Clock* clock = nullptr;               // null: SystemClock
  SchedulerMetrics* metrics = nullptr;  // optional; must outlive the loop
  // Where the step's logits rows are sampled (step_sampler.h).
  EngineSampling engine_sampling = EngineSampling::kAuto;
  // Threads filling token masks while the forward pass runs (structured
  // output, mask_fill_pool.h); 0: the engine thread fills them after it.
  int mask_threads = 1;
};

// What the engine thread last published about its load (after each step
// and each batch of commands), for status queries from other threads.
struct LoadSnapshot {
  struct Tenant {
    std::string name;
    int32_t running = 0;
    int32_t waiting = 0;
  };
  std::vector<Tenant> tenants;  // configured order
  kvpager::PagerStats kv;
  int32_t running = 0;
  int32_t waiting = 0;
  int64_t steps = 0;
};

enum class StopMode {
  kCancel,  // cancel everything queued or running (UNAVAILABLE)
  kDrain,   // refuse new submissions, finish everything accepted, then stop
};

class ServingLoop {
 public:
  // `tokenizer` must outlive the loop. Errors from Scheduler::Create.
  static absl::StatusOr<std::unique_ptr<ServingLoop>> Create(
      std::unique_ptr<engine::Engine> engine,
      const engine::Tokenizer* tokenizer, const ServingLoopOptions& options);

  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;
  // Stop(kCancel).
  ~ServingLoop();

  // Starts the engine thread. At most once.
  void Start();
  // Not from a sink (the engine thread would wait for itself).
  // Stops the engine thread (see StopMode) and waits for it to exit; from
  // now on Submit fails with UNAVAILABLE. kDrain lets the thread finish
  // every accepted request first (waiting out token buckets). Without a
  // thread, does the same on the caller's thread, where kDrain is
  // RunUntilIdle (requests a bucket still holds back are then cancelled).
  // What is left is cancelled with UNAVAILABLE. Idempotent.
  void Stop(StopMode mode = StopMode::kCancel);

  // Thread-safe. Checks what needs no queue state (Scheduler::CheckRequest)
  // and the tenant's max_queued as of the engine thread's last publication
  // (intake_gate.h: RESOURCE_EXHAUSTED with a retry hint, on this thread),
  // and returns those errors (they reach SchedulerMetrics::OnRejected from
  // the engine thread later), or UNAVAILABLE once stopping; otherwise
  // queues the request for the engine thread and returns its id. The
  // engine thread may still refuse it (its tenant's queue filled up
  // meanwhile): then the sink gets OnFinished(kError, RESOURCE_EXHAUSTED
  // with a retry hint) without OnAccepted.
  absl::StatusOr<RequestId> Submit(RequestSpec spec);
  // Thread-safe. Submit for a group that shares one prompt (OpenAI's `n`;
  // scheduler_group.cc says how a group runs and counts):
  // checks Scheduler::CheckGroup (InvalidArgument unless 1..kMaxGroupSize
  // specs with one tenant, prompt, cache salt and priority and each its own
  // sink; InvalidArgument for a group larger than
  // the limits), or UNAVAILABLE once stopping, and returns one id per spec,
  // in order. All or nothing: a refusal at intake (a full queue) finishes
  // every member's sink with it, none accepted. The caller seeds member i
  // (seed + i). Cancel(id) of one member cancels only that member. A group
  // of one is Submit.
  absl::StatusOr<std::vector<RequestId>> SubmitGroup(
      std::vector<RequestSpec> specs);
  // Thread-safe. Cancels the request on the engine thread before its next
  // step; a no-op if it has finished.
  void Cancel(RequestId id);
  // Thread-safe. Ends the request as stopped by `stop_string` after its
  // first `tokens` generated tokens (Scheduler::StopAtString) on the engine
  // thread before its next step; a no-op if it has finished. The delivery
  // side's call when it finds a stop string in the text.
  void StopAtString(RequestId id, std::string stop_string, int32_t tokens);

  // Thread-safe: the load as of the engine thread's last publication.
  LoadSnapshot Load() const;

  // Thread-safe: waits until the engine thread is blocked waiting for work
  // (nothing runnable, no command); false if it was not within `timeout`.
  // A thread that kept stepping with nothing to do would never be.
  bool AwaitIdle(absl::Duration timeout);

  // Manual driving, only when no thread was started: applies the inbox,
  // then runs one step if anything is runnable. Returns whether a step ran.
  bool RunOnce();
  // RunOnce until it runs nothing. Returns the number of steps run.
  int64_t RunUntilIdle();

  // The engine and the scheduler, for the engine thread — or anyone while
  // no thread runs (tests, reports after RunUntilIdle).
  engine::Engine& engine() { return *engine_; }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  struct Command {
    enum Kind { kSubmit, kCancel, kStopString, kRejected } kind = kSubmit;
    RequestId id = 0;  // kSubmit: the first member's; the others follow
    std::vector<RequestSpec> specs;  // kSubmit: a group (of one, by Submit)
    // kRejected: a refusal by Submit's own checks, reported to the metrics
    // from the engine thread.
    std::string tenant;
    absl::StatusCode code = absl::StatusCode::kOk;
    // kStopString: the string, and the tokens its text took.
    std::string stop_string;
    int32_t tokens = 0;
  };

  ServingLoop(std::unique_ptr<engine::Engine> engine,
              EngineSampling engine_sampling, int mask_threads, Clock* clock,
              SchedulerMetrics* metrics, const SchedulerOptions& scheduler);

  void ThreadMain();
  // Applies what is left in the inbox, then cancels every request.
  void Shutdown();
  // Waits until there is a command, runnable work or a reason to exit;
  // returns false to exit. Moves the inbox into *commands.
  bool WaitForWork(std::vector<Command>* commands);
  void Apply(std::vector<Command>* commands);
  // One Schedule / Forward / Sample / Update. Returns whether the plan was
  // non-empty.
  bool Step();
  // Runs the engine on the plan; the output views logits_ and tokens_.
  absl::StatusOr<EngineOutput> Forward(const StepPlan& plan);
  void ReportStep(const StepPlan& plan, absl::Time t0, absl::Time t1,
                  absl::Time t2, absl::Time t3);
  // Copies the scheduler's load into load_ (engine thread), and the
  // waiting counts into intake_.
  void PublishLoad();
  // Tells intake_ each tenant's waiting count (engine thread).
  void PublishIntake();

  // Constant after construction.
  const std::unique_ptr<engine::Engine> engine_;
  Clock* const clock_;
  SchedulerMetrics* const metrics_;

  // Engine thread (or the manual driver).
  std::unique_ptr<Scheduler> scheduler_;
  StepSampler sampler_;
  std::vector<float> logits_;    // (rows, n_vocab), grown as needed
  std::vector<int32_t> tokens_;  // (rows) the engine sampled
  std::vector<Command> applying_;
  std::vector<IntakeGate::Published> intake_published_;  // PublishIntake's

  // Inbox and lifecycle, any thread.
  absl::Mutex mu_;
  absl::CondVar wake_;
  std::vector<Command> inbox_ ABSL_GUARDED_BY(mu_);
  IntakeGate intake_ ABSL_GUARDED_BY(mu_);  // max_queued, before the inbox
  RequestId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;  // blocked in WaitForWork
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  StopMode stop_mode_ ABSL_GUARDED_BY(mu_) = StopMode::kCancel;
  std::thread thread_;  // Start / Stop / destructor only

  mutable absl::Mutex load_mu_;
  LoadSnapshot load_ ABSL_GUARDED_BY(load_mu_);
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_SERVING_LOOP_H_
