#ifndef PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_H_
#define PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_H_

// Sampling a logits row inside the engine (Engine::ForwardAndSample), so a
// device backend returns token ids instead of vocabulary-sized rows. It is
// the host sampler's rule (sampler.h, steps 2–8) for requests without
// penalties or logprobs, computed in a form a GPU can run one thread block
// per row and reproduce bit for bit:
//
//   1. a non-finite logit: the result is -1 - (the first such id);
//   then only the ids the mask allows (RowSampling::allowed, token_mask.h)
//   are candidates: none is kNoAllowedToken;
//   2. temperature 0: the largest logit, ties to the lowest id;
//   3. each id's weight w = e^((z - max) / T), by WeightExp
//      (row_sampling_math.h), and mass W = floor(w · 2^40); max is the
//      largest allowed logit;
//   4. top-k (0 < k < vocab): the k first-ranked ids (larger logit first,
//      then lower id) survive;
//   5. top-p (< 1): of those, the shortest rank prefix whose mass reaches
//      top_p × their mass survives;
//   6. min-p (> 0): survivors with w < min_p are dropped;
//   7. draw: with S the survivors' mass and t = floor(u · S), the first
//      survivor in id order whose running mass exceeds t; when rounding put
//      t at S, the last survivor with W > 0.
// The most likely token (w = 1) survives 4–6, so a draw always exists.
//
// Against SequenceSampler::Sample with the same u (SamplingUniform(seed,
// step)): the same filters and the same inverse-CDF draw, but masses are
// exact integers instead of double sums of std::exp, so the two agree
// except where u or top_p falls within rounding of a boundary between two
// tokens (and tokens below 2^-40 of the most likely one are never drawn).
// Every backend that samples in the engine gives the same token for the
// same logits row.

#include <cstdint>

#include "absl/types/span.h"
#include "engine/sampling/row_sampling_math.h"  // RowSampling

namespace paceline::engine {

// The token of `row` under the rule above; negative for a non-finite logit
// (-1 - its id) or kNoAllowedToken. `row` must not be empty.
int32_t SampleRow(absl::Span<const float> row, const RowSampling& sampling);

// The id that SampleRow's negative result names.
inline int32_t NonFiniteLogitId(int32_t result) { return -1 - result; }

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_H_
