#include "engine/sampling/logits_processor.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "engine/sampling/sampler.h"

namespace paceline::engine {
namespace {

class PenaltyProcessor final : public LogitsProcessor {
 public:
  PenaltyProcessor(float repetition, float presence, float frequency,
                   absl::Span<const int32_t> prompt)
      : repetition_(repetition), presence_(presence), frequency_(frequency) {
    // Only the repetition penalty looks at prompt tokens.
    if (repetition_ == 1.0f) return;
    for (int32_t token : prompt) counts_.try_emplace(token, 0);
  }

  void Apply(absl::Span<float> logits) const override {
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

  void Accept(int32_t token) override { ++counts_[token]; }

 private:
  float repetition_;
  float presence_;
  float frequency_;
  // Token -> times generated, for every token in the prompt (0 when only
  // there; tracked only with a repetition penalty) or generated.
  absl::flat_hash_map<int32_t, int32_t> counts_;
};

class LogitBiasProcessor final : public LogitsProcessor {
 public:
  explicit LogitBiasProcessor(std::vector<std::pair<int32_t, float>> bias)
      : bias_(std::move(bias)) {}

  void Apply(absl::Span<float> logits) const override {
    for (const auto& [token, bias] : bias_) logits[token] += bias;
  }
  void Accept(int32_t) override {}

 private:
  std::vector<std::pair<int32_t, float>> bias_;  // (token, bias)
};

}  // namespace

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

}  // namespace paceline::engine
