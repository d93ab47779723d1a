#ifndef PACELINE_SCHEDULER_STEP_H_
#define PACELINE_SCHEDULER_STEP_H_

// The values one engine step passes between its four stages
// (serving_loop.h):
//
//   Scheduler::Schedule  -> StepPlan      what the engine runs
//   the engine           -> EngineOutput  (step_sampler.h) logits rows and
//                                         the tokens of rows it sampled
//   StepSampler::Sample  -> StepTokens    one token (or error) per row
//   Scheduler::Update    <- StepTokens    stop checks, sinks, frees
//
// Plain values on the engine thread; each is valid until its producer's
// next call.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/forward_batch.h"
#include "engine/sampling/sampler.h"
#include "kvpager/block_table.h"
#include "scheduler/request.h"

namespace paceline::scheduler {

// One request's part of a step.
struct ScheduledRequest {
  Request* request = nullptr;
  // Granted: [num_computed, num_computed + n), then num_draft tokens of
  // Request::draft() (speculative decoding) when num_draft > 0.
  int32_t num_tokens = 0;
  int32_t num_draft = 0;
  // Its first row of the step's logits, or -1; with a draft, 1 + num_draft
  // rows from there: the last token's, then each draft token's.
  int32_t logits_row = -1;
  // An embedding request's first row of StepPlan::hidden, or -1; then
  // SequenceSlice::num_hidden rows (EmbeddingPooler::RowsNeeded).
  int32_t hidden_row = -1;
};

// What the engine runs this step. Produced by Schedule, valid until the next
// Schedule.
struct StepPlan {
  engine::ForwardBatch batch;
  // Copy-on-write copies to run before the forward pass
  // (Engine::CopyBlocks).
  std::vector<kvpager::BlockCopy> copies;
  // Recurrent-state copies to run before the forward pass, in order
  // (Engine::CopyStates; hybrid models): forks made by the last Update,
  // then this step's snapshots of speculating requests (scheduler.cc).
  std::vector<kvpager::StateCopy> state_copies;
  // Parallel to batch.sequences.
  std::vector<ScheduledRequest> scheduled;
  // Rows of the slices' logits (SequenceSlice::num_logits), in slice
  // order: logits_row runs over [0, num_logit_rows).
  int32_t num_logit_rows = 0;
  int32_t num_preempted = 0;
  // The hidden rows embedding requests asked for, which the engine writes
  // (batch.hidden views it): (NumHiddenRows(batch), n_embd).
  std::vector<float> hidden;

  bool empty() const { return scheduled.empty(); }
  // Empties the plan, keeping its buffers.
  void Clear() {
    batch.tokens.clear();
    batch.sequences.clear();
    copies.clear();
    state_copies.clear();
    scheduled.clear();
    hidden.clear();
    batch.hidden = {};
    num_logit_rows = num_preempted = 0;
  }
};

// One logits row's outcome.
struct SampledRow {
  // OK, or why this request's step failed (a non-finite logit, an engine
  // token outside the vocabulary); the request then finishes with kError.
  absl::Status status;
  // When OK: the token; its logprobs only when the request asked for them.
  engine::SampleResult sample;
};

// What the sampling stage hands Scheduler::Update.
struct StepTokens {
  // OK, or the step's failure (the engine's error, a malformed output):
  // every request of the plan then finishes with kError and `rows` is not
  // read.
  absl::Status status;
  // (num_logit_rows) by logits row when `status` is OK.
  std::vector<SampledRow> rows;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_STEP_H_
