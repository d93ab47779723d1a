#ifndef PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
#define PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_

// The sampling chain's links that rewrite a request's logits row before the
// filters (sampler.h, step 1): each holds its own per-request state, sees
// every token the request generates (Accept), and copies itself for a fork.
// A request whose chain has any of these is sampled on the host (the engine
// samples rows that need only the mask and the filters: row_sampling.h).
//
// Links, in chain order: penalties (repetition, presence, frequency), then
// logit bias. The token mask (token_mask.h) is not one of these: it removes
// tokens rather than rewriting logits, and both backends apply it.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
  // An independent processor in the same state.
  virtual std::unique_ptr<LogitsProcessor> Clone() const = 0;
};

// The chain's rewriting links for `params` over `prompt` (ids in the
// vocabulary), in order; empty when every one is neutral.
std::vector<std::unique_ptr<LogitsProcessor>> MakeLogitsProcessors(
    const SamplingParams& params, absl::Span<const int32_t> prompt);

// CTRL's repetition penalty over the prompt and generated tokens, then
// OpenAI's presence and frequency penalties over the generated ones (the
// formulas are sampler.h's).
class PenaltyProcessor final : public LogitsProcessor {
 public:
  PenaltyProcessor(float repetition, float presence, float frequency,
                   absl::Span<const int32_t> prompt);

  void Apply(absl::Span<float> logits) const override;
  void Accept(int32_t token) override { ++counts_[token]; }
  std::unique_ptr<LogitsProcessor> Clone() const override {
    return std::make_unique<PenaltyProcessor>(*this);
  }

 private:
  float repetition_;
  float presence_;
  float frequency_;
  // Token -> times generated, for every token in the prompt (0 when only
  // there; tracked only with a repetition penalty) or generated.
  absl::flat_hash_map<int32_t, int32_t> counts_;
};

// OpenAI's logit_bias: a constant added to listed tokens' logits.
class LogitBiasProcessor final : public LogitsProcessor {
 public:
  explicit LogitBiasProcessor(std::vector<std::pair<int32_t, float>> bias)
      : bias_(std::move(bias)) {}

  void Apply(absl::Span<float> logits) const override;
  void Accept(int32_t) override {}
  std::unique_ptr<LogitsProcessor> Clone() const override {
    return std::make_unique<LogitBiasProcessor>(*this);
  }

 private:
  std::vector<std::pair<int32_t, float>> bias_;  // (token, bias)
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
