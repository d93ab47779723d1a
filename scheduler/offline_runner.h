#ifndef PACELINE_SCHEDULER_OFFLINE_RUNNER_H_
#define PACELINE_SCHEDULER_OFFLINE_RUNNER_H_

// Runs a fixed set of requests together through a ServingLoop on the
// caller's thread until every one has finished, and returns each one's
// output: what `paceline generate` with several --prompt needs. Each
// continuation equals the one the request would get alone (the engine is
// batch-invariant and preemption does not change output), so the CLI can
// print them labelled, in order.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/model/kv_layout.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/step_sampler.h"
#include "scheduler/token_sink.h"

namespace paceline::scheduler {

struct OfflineRequest {
  std::vector<int32_t> prompt;  // non-empty
  engine::SamplingParams sampling;
  StopConditions stop;            // max_tokens >= 1
  int32_t max_draft_tokens = 0;   // speculative decoding (request.h)
  int32_t max_forced_tokens = 0;  // fast-forward (request.h)
};

struct OfflineResult {
  std::vector<int32_t> tokens;  // delivered ids (no EOS / stop token)
  FinishInfo finish;            // reason, usage, timings
};

struct OfflineOptions {
  int32_t max_batched_tokens = 0;  // 0 = the engine's max_tokens_per_step()
  int32_t max_running = 256;
  int32_t speculation_max_step_tokens =
      SchedulerOptions{}.speculation_max_step_tokens;
  EngineSampling engine_sampling = EngineSampling::kAuto;
};

struct OfflineStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;     // summed over requests
  int64_t generated_tokens = 0;  // summed completion tokens
  int64_t preemptions = 0;
  absl::Duration elapsed;  // from the first step to the last
};

// KV blocks for every request to run at once without preemption: the sum
// of ceil((prompt + max_tokens - 1) / block_size). Size the engine's pool
// with it (fewer blocks still work, with preemptions).
int64_t KvBlocksToRunTogether(absl::Span<const OfflineRequest> requests,
                              int32_t block_size);
// The same under `layout`'s KV groups (engine/model/kv_layout.h): each
// sequence holds BlocksToHold(layout, ...) blocks, a windowed group only
// its window and a step of up to `step_tokens` positions.
int64_t KvBlocksToRunTogether(absl::Span<const OfflineRequest> requests,
                              int32_t block_size,
                              const engine::KvLayout& layout,
                              int64_t step_tokens);

// Runs `requests` (all under one tenant, "offline") and returns their
// results in the same order. A request the scheduler refuses (too long for
// the context or the pool, bad parameters) fails the whole call, before
// anything runs, with the error prefixed by "request N: ". An engine or
// sampling failure does not: that request's result has reason kError and
// the status. `stats` may be null.
absl::StatusOr<std::vector<OfflineResult>> RunOffline(
    std::unique_ptr<engine::Engine> engine, const engine::Tokenizer& tokenizer,
    std::vector<OfflineRequest> requests, const OfflineOptions& options,
    OfflineStats* stats = nullptr);

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_OFFLINE_RUNNER_H_
