#ifndef PACELINE_ENGINE_MODEL_ROPE_TABLE_H_
#define PACELINE_ENGINE_MODEL_ROPE_TABLE_H_

// A model's rotary position embedding as one table both engines read, so
// the CPU and CUDA paths cannot disagree: pair i of a head at position p
// turns by theta = p * inv_freq[i], and the rotated pair is multiplied by
// mscale (cos and sin both scaled).
//
// Every scaling kind reduces to that form. With f_i = freq_base^(-2i / d)
// / freq_factor_i (d = rope_dim; Llama 3 factors, 1 when the file has
// none) and s = 1 / rope.scaling.factor:
//   none:    inv_freq_i = f_i
//   linear:  inv_freq_i = s * f_i
//   yarn:    inv_freq_i = f_i * (s * (1 - mix_i) + mix_i), mix_i =
//            ext_factor * ramp_i: pairs turning fast enough to complete
//            many turns within the original context keep their frequency
//            (extrapolate), slow ones are interpolated, with a linear ramp
//            between the correction dims of beta_fast and beta_slow:
//              dim(beta) = d * ln(orig_ctx / (2 pi beta)) / (2 ln base)
//              lo = max(0, floor(dim(beta_fast))),
//              hi = min(d - 1, ceil(dim(beta_slow)))
//              ramp_i = 1 - clamp((i - lo) / max(hi - lo, 0.001), 0, 1)
// and mscale = rope.scaling.attn_factor times, for yarn with ext_factor >
// 0, yarn_attn_factor when the file gives it, else 0.1 ln(factor) + 1
// (factor > 1; 1 otherwise). llama.cpp computes the same for the
// architectures here; it ignores the yarn_* keys for them, which
// conversions only write when the model's config sets them.

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/model/model_config.h"

namespace paceline::engine {

struct RopeTable {
  std::vector<double> inv_freq;  // (rope_dim / 2) radians per position
  double mscale = 1.0;           // multiplies cos and sin
};

// InvalidArgument naming the field when the config's rope cannot be built:
// rope_dim odd or not positive, a non-positive base or factor, yarn without
// an original context or with beta_slow > beta_fast, ext_factor outside
// [0, 1].
absl::Status CheckRopeConfig(const ModelConfig& config);

// The table of a config CheckRopeConfig accepts. `freq_factors` is empty
// or holds rope_dim / 2 positive values (rope_freqs.weight).
RopeTable MakeRopeTable(const ModelConfig& config,
                        absl::Span<const float> freq_factors = {});

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_ROPE_TABLE_H_
