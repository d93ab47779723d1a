#ifndef PACELINE_SCHEDULER_STEP_SAMPLER_H_
#define PACELINE_SCHEDULER_STEP_SAMPLER_H_

// The step's sampling stage: it turns what the engine returned for a plan
// into one token per logits row (StepTokens, step.h), and it alone decides
// which rows the engine samples.
//
//   rows = sampler.EngineRows(plan);   // before the engine runs: empty, or
//                                      // one RowSampling per logits row;
//                                      // starts filling the token masks
//   engine: rows.empty() ? Forward(plan.batch, logits)
//                        : ForwardAndSample(plan.batch, rows, tokens, logits,
//                                           [&] { sampler.AwaitMasks(); })
//   tokens = sampler.Sample(plan, EngineOutput{logits, tokens});
//
// Token masks (structured output) are filled on a MaskFillPool while the
// engine runs the forward pass: an engine row's into this sampler's buffer
// (RowSampling::allowed points there; the engine awaits them before it
// samples), a host row's into its SequenceSampler (PrefillMask). Sample
// awaits them before it samples.
//
// A row goes to the engine when engine sampling is on (EngineSampling) and
// its request needs nothing the host alone has (SequenceSampler::
// EngineCanSample: no penalties or bias, no logprobs; a token mask goes
// along, filled here before the engine runs) and carries no draft: a
// drafted request's rows are sampled here in order, each only when the
// one before it matched its draft token (scheduler.cc, AddDrafts). Host rows
// are sampled with the request's SequenceSampler; engine rows have their token
// recorded in it (AcceptGenerated). Either way the sampler's step counter
// advances by one, so a request's n-th token draws with SamplingUniform(seed,
// n) and depends on nothing else in the batch.
//
// Thread-compatible: the engine thread's (it mutates the plan's requests'
// samplers).

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/sampling/row_sampling.h"
#include "engine/sampling/sampler.h"
#include "scheduler/mask_fill_pool.h"
#include "scheduler/step.h"

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

// What the engine returned for a plan.
struct EngineOutput {
  // (num_logit_rows, n_vocab): the slices' rows in slice order (step.h);
  // rows the engine sampled may hold anything.
  absl::Span<const float> logits;
  // (num_logit_rows) when EngineRows was not empty: the engine's token
  // (ForwardAndSample) at each in_engine row; otherwise unread.
  absl::Span<const int32_t> tokens;
};

class StepSampler {
 public:
  // Reads the engine's vocabulary and whether it samples on its device;
  // `mask_threads` workers fill token masks (0: the engine thread does,
  // once the forward pass is done).
  StepSampler(const engine::Engine& engine, EngineSampling mode,
              int mask_threads = 0);

  StepSampler(const StepSampler&) = delete;
  StepSampler& operator=(const StepSampler&) = delete;

  // Whether any row may go to the engine.
  bool engine_samples() const { return engine_samples_; }

  // The engine's part of `plan`: one entry per logits row, in_engine for
  // the rows it samples — or empty when it samples none (then run Forward).
  // Valid until the next call.
  absl::Span<const engine::RowSampling> EngineRows(const StepPlan& plan);

  // Returns once the masks EngineRows started are filled.
  void AwaitMasks() { pool_.Wait(); }

  // Samples `plan`'s rows from `output` and returns them (valid until the
  // next call). Precondition: `output` is the engine's result for the
  // EngineRows of this plan (the last EngineRows call), with no request
  // changed in between: the rows it marked in_engine take the engine's
  // token, the others are sampled here. The
  // result's status is the engine's error, or InternalError when `output`
  // is shorter than the plan's rows; a row's status is its request's
  // sampling error (InternalError naming the token for a non-finite logit,
  // or an engine token outside the vocabulary). Requests whose rows fail
  // keep their sampler unchanged.
  const StepTokens& Sample(const StepPlan& plan,
                           const absl::StatusOr<EngineOutput>& output);

 private:
  // The one decision: whether this request's row goes to the engine.
  bool InEngine(Request& request) const;
  absl::Status CheckOutput(const StepPlan& plan,
                           const absl::StatusOr<EngineOutput>& output) const;
  // Starts filling the masks of `plan`'s masked rows.
  void StartMasks(const StepPlan& plan);
  // A drafted request's rows (scheduler.cc, AddDrafts), on the host.
  void SampleDraftRows(const ScheduledRequest& s,
                       absl::Span<const float> logits);
  void SampleOnHost(engine::SequenceSampler& sampler,
                    absl::Span<const float> logits, SampledRow* row);
  void TakeEngineToken(engine::SequenceSampler& sampler, int32_t token,
                       SampledRow* row) const;

  // Constant after construction.
  const int32_t vocab_size_;
  const bool engine_samples_;

  MaskFillPool pool_;
  std::vector<engine::RowSampling> rows_;  // (num_logit_rows) or empty
  // (num_logit_rows, MaskWords(vocab)): the engine rows' token masks.
  std::vector<uint32_t> masks_;
  engine::SamplerScratch scratch_;
  StepTokens tokens_;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_STEP_SAMPLER_H_
