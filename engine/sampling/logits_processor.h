#ifndef PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
#define PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_

// The sampling chain's links that rewrite a request's logits row before the
// filters (sampler.h, step 1): each holds its own per-request state and sees
// every token the request generates (Accept). Every sampler builds its own
// chain from its parameters (a fork of `n` included). A request whose chain
// has any of these is sampled on the host (the engine samples rows that
// need only the mask and the filters: row_sampling.h).
//
// Links, in chain order: penalties (repetition, presence, frequency), then
// logit bias. The token mask (token_mask.h) is not one of these: it removes
// tokens rather than rewriting logits, and both backends apply it.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"

namespace paceline::engine {

struct SamplingParams;

// Thread-compatible: one request's, on the engine thread.
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;

  // Rewrites `logits` (the vocabulary's row) in place.
  virtual void Apply(absl::Span<float> logits) const = 0;
  // Records the request's next token (in the vocabulary).
  virtual void Accept(int32_t token) = 0;
};

// The chain's rewriting links for `params` over `prompt` (ids in the
// vocabulary), in order: CTRL's repetition penalty over the prompt and
// generated tokens, then OpenAI's presence and frequency penalties over the
// generated ones (the formulas are sampler.h's), then OpenAI's logit_bias.
// Empty when every one is neutral.
std::vector<std::unique_ptr<LogitsProcessor>> MakeLogitsProcessors(
    const SamplingParams& params, absl::Span<const int32_t> prompt);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
