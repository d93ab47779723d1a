#include "engine/sampling/logits_processor.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/sampling/sampler.h"

namespace paceline::engine {

std::vector<std::unique_ptr<LogitsProcessor>> MakeLogitsProcessors(
    const SamplingParams& params, absl::Span<const int32_t> prompt) {
  std::vector<std::unique_ptr<LogitsProcessor>> chain;
  if (params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
      params.frequency_penalty != 0.0f) {
    chain.push_back(std::make_unique<PenaltyProcessor>(
        params.repetition_penalty, params.presence_penalty,
        params.frequency_penalty, prompt));
  }
  if (!params.logit_bias.empty()) {
    chain.push_back(std::make_unique<LogitBiasProcessor>(params.logit_bias));
  }
  return chain;
}

PenaltyProcessor::PenaltyProcessor(float repetition, float presence,
                                   float frequency,
                                   absl::Span<const int32_t> prompt)
    : repetition_(repetition), presence_(presence), frequency_(frequency) {
  // Only the repetition penalty looks at prompt tokens.
  if (repetition_ == 1.0f) return;
  for (int32_t token : prompt) counts_.try_emplace(token, 0);
}

void PenaltyProcessor::Apply(absl::Span<float> logits) const {
  // Each entry touches its own token, so the map's order does not matter.
  for (const auto& [token, count] : counts_) {
    float& logit = logits[token];
    if (repetition_ != 1.0f) {
      logit = logit > 0.0f ? logit / repetition_ : logit * repetition_;
    }
    if (count > 0) {
      logit -= presence_ + frequency_ * static_cast<float>(count);
    }
  }
}

void LogitBiasProcessor::Apply(absl::Span<float> logits) const {
  for (const auto& [token, bias] : bias_) logits[token] += bias;
}

}  // namespace paceline::engine
