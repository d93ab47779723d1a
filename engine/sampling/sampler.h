#ifndef PACELINE_ENGINE_SAMPLING_SAMPLER_H_
#define PACELINE_ENGINE_SAMPLING_SAMPLER_H_

// Turns one request's logits row into its next token: the sampling chain.
//
// The chain's links, in order, on a row (each is skipped when its parameter
// is neutral):
//   1. the rewriting links (logits_processor.h), on a copy (the caller's
//      row is never modified):
//        repetition penalty (CTRL): for every token in the prompt or
//          generated so far, a positive logit is divided by
//          repetition_penalty and a negative one multiplied by it;
//        then presence / frequency (OpenAI): for every generated token,
//          logit -= presence_penalty + frequency_penalty * count;
//        then logit bias (OpenAI): logit += logit_bias[token].
//   2. non-finite check: a NaN or ±Inf logit (raw, or produced by step 1)
//      fails this request's step with InternalError naming the token;
//      nothing else is affected.
//   2b. the token mask (token_mask.h): a token it does not allow counts as
//      -infinity from here on; a mask that allows nothing fails the step
//      with InternalError.
//   3. greedy when temperature == 0: the largest logit, ties to the lowest id.
//   4. temperature: z / T.
//   5. top-k: the k largest logits, ties to the lower ids.
//   6. top-p: the smallest prefix of the survivors, sorted by probability
//      (renormalized over them), whose mass reaches top_p.
//   7. min-p: drops survivors whose probability is below min_p times the
//      largest probability.
//   8. draw: inverse CDF over the survivors in ascending token-id order with
//      one uniform u = SamplingUniform(seed, step).
// The most likely token always survives 5–7, so a draw always exists.
//
// Determinism: the n-th generated token (step n, counting from 0) depends
// only on the logits row, the parameters, the request's token history and
// SamplingUniform(seed, n); never on other requests, on which scratch was
// used, or on how the caller interleaves samplers. A sampler rebuilt from
// the prompt and the tokens generated so far (preemption by recompute)
// continues with the same draws. The integer RNG is exact on every platform;
// the float math uses std::exp, so results are bit-identical wherever the
// logits and libm are. Rows the engine samples (EngineRow, row_sampling.h)
// draw with the same uniform under the engine's integer-mass rule.
//
// Logprobs follow vLLM's default ("raw logprobs"): the log-softmax of the raw
// logits row, before penalties, temperature and filtering. They describe the
// model, not the sampling choice, and are the same for greedy and sampled
// requests with the same row.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/row_sampling.h"
#include "engine/sampling/token_mask.h"

namespace paceline::engine {

inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
// The penalty divides positive logits and multiplies negative ones (or the
// reverse below 1): bounded both ways so no finite logit can overflow.
inline constexpr float kMinRepetitionPenalty = 1.0f / kMaxRepetitionPenalty;
inline constexpr float kMaxPresencePenalty = 2.0f;   // OpenAI's range,
inline constexpr float kMaxFrequencyPenalty = 2.0f;  // ± this value
inline constexpr float kMaxLogitBias = 100.0f;       // OpenAI's range too

struct SamplingParams {
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int32_t top_k = 0;         // >= 0; 0 = off; >= vocab size is also off
  float top_p = 1.0f;        // (0, 1]; 1 = off
  float min_p = 0.0f;        // [0, 1]; 0 = off
  // [kMinRepetitionPenalty, kMaxRepetitionPenalty]; 1 = off. Applies to prompt
  // and generated tokens (vLLM's and CTRL's convention; no window).
  float repetition_penalty = 1.0f;
  // [-2, 2]; 0 = off. Apply to generated tokens only (OpenAI's convention).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Any value; the server picks a random one when the client gives none.
  uint64_t seed = 0;
  // OpenAI's pair: `logprobs` asks for the sampled token's logprob;
  // `top_logprobs` (0..kMaxTopLogprobs, at most the vocabulary size, and
  // only with `logprobs`) for that many most likely alternatives.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // OpenAI's logit_bias: (token, bias) pairs, each token in the vocabulary
  // at most once, bias in [-kMaxLogitBias, kMaxLogitBias]; empty = off.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The token mask's prototype (token_mask.h); each sampler created with
  // these parameters starts from its own Clone. Null = every token allowed.
  std::shared_ptr<const TokenMask> mask;
};

// What CheckSamplingParams can find wrong: a SamplingParams field, or the
// vocabulary size it is checked against.
enum class SamplingField : int8_t {
  kVocabSize,
  kTemperature,
  kTopK,
  kTopP,
  kMinP,
  kRepetitionPenalty,
  kPresencePenalty,
  kFrequencyPenalty,
  kTopLogprobs,
  kLogitBias,
};
// The member's name: "temperature", "top_k", ..., "logit_bias"; and
// "vocab_size".
absl::string_view SamplingFieldName(SamplingField field);

// Which field is invalid, and why, so a caller can name the field in its
// own terms (the server uses its API's field paths) without reading text.
struct SamplingParamError {
  SamplingField field = SamplingField::kVocabSize;
  // What is wrong, to follow the field's name: "must be in (0, 1], got 0".
  std::string reason;
};

// The first invalid field, checked in declaration order after vocab_size
// (which must be > 0), or nullopt when `params` are valid for a vocabulary
// of `vocab_size` tokens (the ranges are on SamplingParams' fields).
std::optional<SamplingParamError> CheckSamplingParams(
    const SamplingParams& params, int32_t vocab_size);

// OK, or InvalidArgument "<field name> <reason>" for CheckSamplingParams'
// error (e.g. "top_p must be in (0, 1], got 0").
absl::Status Validate(const SamplingParams& params, int32_t vocab_size);

// The counter-based RNG: the uniform in [0, 1) that step `step` of a request
// with seed `seed` draws with. key = Mix(seed + G); bits = Mix(key + (step +
// 1) * G); u = (bits >> 11) * 2^-53, where G = 0x9e3779b97f4a7c15 and Mix is
// SplitMix64's output function (all arithmetic mod 2^64). That is, the
// step-th output of a SplitMix64 stream whose state starts at a hash of the
// seed.
uint64_t SamplingRandomBits(uint64_t seed, uint64_t step);
double SamplingUniform(uint64_t seed, uint64_t step);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;

  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct SampleResult {
  int32_t token = 0;
  // The sampled token's raw logprob; 0 unless params.logprobs.
  float logprob = 0.0f;
  // params.top_logprobs entries: the largest raw logprobs, descending, ties
  // to the lower id. Empty unless params.logprobs.
  std::vector<TokenLogprob> top_logprobs;
};

// Reusable buffers (a few vocabulary-sized arrays) shared by every sampler
// that runs on one thread, so per-request state stays small and the
// steady-state path does not allocate. Contents never carry over between
// calls. Thread-compatible: one per thread.
class SamplerScratch {
 public:
  SamplerScratch() = default;
  SamplerScratch(const SamplerScratch&) = delete;
  SamplerScratch& operator=(const SamplerScratch&) = delete;

 private:
  friend class SequenceSampler;
  std::vector<float> logits_;   // (vocab) the penalized row
  std::vector<int32_t> ids_;    // (<= vocab) candidate token ids
  std::vector<float> weights_;  // (vocab) by id: exp((z - max) / T)
  std::vector<uint32_t> mask_;  // (MaskWords(vocab)) the token mask
};

// One request's sampling state: its parameters, its chain's links (each
// with its own state) and step counter. Thread-compatible; movable.
class SequenceSampler {
 public:
  // InvalidArgument when Validate fails or a prompt token is outside
  // [0, vocab_size). The mask, if any, is a Clone of params.mask.
  static absl::StatusOr<SequenceSampler> Create(
      const SamplingParams& params, int32_t vocab_size,
      absl::Span<const int32_t> prompt);

  SequenceSampler(SequenceSampler&&) = default;
  SequenceSampler& operator=(SequenceSampler&&) = default;

  // Samples the next token from `logits` (vocab_size floats, not modified)
  // and records it as generated (step + 1). On error the sampler is
  // unchanged, so the request may be failed or the step retried:
  // InvalidArgument if logits.size() != vocab_size; InternalError on a
  // non-finite logit or a mask that allows nothing. Allocates only for the
  // returned top_logprobs, the penalty history's growth, and once to grow
  // `scratch`.
  absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits,
                                      SamplerScratch* scratch);

  // Records a generated token without sampling (a token the engine
  // sampled; a forced token). InvalidArgument outside [0, vocab_size) or
  // where the mask does not allow it (the sampler then unchanged).
  absl::Status AcceptGenerated(int32_t token);

  // Applies step 1 (the rewriting links) in place to a vocab_size row, as
  // Sample does to its copy. Exposed for tests and for other backends to
  // check against.
  void ApplyProcessors(absl::Span<float> logits) const;

  // Whether the engine may sample this request's rows (row_sampling.h): no
  // rewriting link and no logprobs, which need the host. A mask may go.
  bool EngineCanSample() const;
  // The next step's row for the engine: the parameters and this step's
  // uniform (SamplingUniform(seed, step())), without a mask (see
  // FillMask). Record the token it returns with AcceptGenerated.
  RowSampling EngineRow() const;

  bool has_mask() const { return mask_ != nullptr; }
  // Writes the next token's mask (MaskWords(vocab_size) words) when
  // has_mask(): the prefilled one if there is one.
  void FillMask(absl::Span<uint32_t> allowed);
  // Fills the next token's mask into this sampler's own buffer, where the
  // next Sample or FillMask finds it (until the mask moves past a token):
  // so a step's masks can be filled on other threads while the forward
  // pass runs. Like every method, never concurrent with another call on
  // this sampler. A no-op without a mask.
  void PrefillMask();
  // Fast-forward: up to `max` tokens the mask forces next (token_mask.h),
  // appended to `out`; none without a mask. Record each with
  // AcceptGenerated.
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) const;
  // How many of `tokens`, from the first, the mask allows in turn from
  // here (all of them without a mask): where a draft is cut.
  int32_t AllowedPrefix(absl::Span<const int32_t> tokens) const;

  const SamplingParams& params() const { return params_; }
  // Tokens generated so far: the step the next Sample draws with.
  uint64_t step() const { return step_; }

 private:
  SequenceSampler(const SamplingParams& params, int32_t vocab_size);

  // Sets the tokens the mask does not allow to -infinity in `z`; false when
  // it allows none.
  bool ApplyMask(absl::Span<float> z, SamplerScratch* scratch);
  void Record(int32_t token);
  int32_t Draw(const float* z, float max, SamplerScratch* scratch) const;
  void FillLogprobs(absl::Span<const float> logits, SampleResult* result,
                    SamplerScratch* scratch) const;

  SamplingParams params_;
  int32_t vocab_size_ = 0;
  uint64_t step_ = 0;
  std::vector<std::unique_ptr<LogitsProcessor>> processors_;  // step 1
  std::unique_ptr<TokenMask> mask_;                           // step 2b
  std::vector<uint32_t> prefilled_;  // (MaskWords(vocab)) see PrefillMask
  bool prefilled_valid_ = false;     // for the mask's current state
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_SAMPLER_H_
