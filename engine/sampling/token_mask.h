#ifndef PACELINE_ENGINE_SAMPLING_TOKEN_MASK_H_
#define PACELINE_ENGINE_SAMPLING_TOKEN_MASK_H_

// The sampling chain's token-mask link: which tokens a request may sample
// next. A grammar (structured output) implements it; tests script one.
//
// A mask is a bitmask over the vocabulary, MaskWords(vocab) 32-bit words,
// bit (id % 32) of word (id / 32) set when token id is allowed; bits at or
// past the vocabulary size are ignored. Both samplers honour it the same
// way: a masked token's logit counts as -infinity after the non-finite
// check, so it is never drawn and takes no part in top-k, top-p or min-p,
// and the largest allowed logit is the greedy choice (the host's
// SequenceSampler::Sample; row_sampling.h's SampleRow and the CUDA kernel,
// which read RowSampling::allowed).
//
// The mask follows the request's tokens: Accept advances it past each token
// the request generates (sampled, taken from the engine, or drafted and
// verified), so a drafted row is sampled under the state the tokens before
// it left. Forks (a group's members, `n`) each start from Clone of the
// prototype in SamplingParams; preemption keeps the request's sampler and
// so its mask state (recompute does not re-sample the tokens it replays).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/sampling/row_sampling_math.h"  // MaskWords, MaskAllows

namespace paceline::engine {

// Thread-compatible: owned by one request's sampler on the engine thread
// (Fill may run on another thread while that request's step does not).
class TokenMask {
 public:
  virtual ~TokenMask() = default;

  // Writes every word of `allowed` (MaskWords(vocab) words) for the next
  // token. A mask that allows nothing fails the request's step.
  virtual void Fill(absl::Span<uint32_t> allowed) = 0;

  // Advances past `token`, the request's next token. InvalidArgument (and
  // the state unchanged) when the mask did not allow it.
  virtual absl::Status Accept(int32_t token) = 0;

  // An independent mask in the same state.
  virtual std::unique_ptr<TokenMask> Clone() const = 0;

  // Fast-forward: the tokens that must come next, whatever is sampled,
  // where exactly one continuation is allowed — up to `max` of them,
  // appended to `out` (the state unchanged; Accept each to move past
  // them). None by default.
  virtual void ForcedTokens(int32_t max, std::vector<int32_t>* out) const {
    (void)max;
    (void)out;
  }
};

// How many of `tokens`, from the first, `mask` allows in turn (a
// speculative draft is cut there).
inline int32_t AllowedPrefix(const TokenMask& mask,
                             absl::Span<const int32_t> tokens) {
  if (tokens.empty()) return 0;
  const std::unique_ptr<TokenMask> probe = mask.Clone();
  int32_t n = 0;
  for (const int32_t token : tokens) {
    if (!probe->Accept(token).ok()) break;
    ++n;
  }
  return n;
}

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_TOKEN_MASK_H_
