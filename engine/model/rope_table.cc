#include "engine/model/rope_table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace paceline::engine {
namespace {

// The (fractional) pair dimension whose wavelength fits `turns` full
// turns into the original context.
double CorrectionDim(const ModelConfig& c, double turns) {
  return c.rope_dim *
         std::log(static_cast<double>(c.rope_original_context) /
                  (turns * 2 * M_PI)) /
         (2 * std::log(c.rope_freq_base));
}

// mix_i of every pair: 1 keeps the extrapolated frequency, 0 interpolates.
std::vector<double> YarnMix(const ModelConfig& c) {
  const double lo =
      std::max(0.0, std::floor(CorrectionDim(c, c.yarn_beta_fast)));
  const double hi = std::min(static_cast<double>(c.rope_dim - 1),
                             std::ceil(CorrectionDim(c, c.yarn_beta_slow)));
  const double span = std::max(hi - lo, 0.001);
  std::vector<double> mix(static_cast<size_t>(c.rope_dim / 2));
  for (size_t i = 0; i < mix.size(); ++i) {
    const double y = (static_cast<double>(i) - lo) / span;
    mix[i] = (1 - std::clamp(y, 0.0, 1.0)) * c.yarn_ext_factor;
  }
  return mix;
}

double YarnMagnitude(const ModelConfig& c) {
  if (c.yarn_ext_factor == 0) return 1;
  if (c.yarn_attn_factor > 0) return c.yarn_attn_factor;
  const double factor = c.rope_scaling_factor;
  return factor > 1 ? 0.1 * std::log(factor) + 1 : 1;
}

absl::Status Invalid(absl::string_view field, double value,
                     absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("rope ", field, " is ", value, "; want ", want));
}

}  // namespace

absl::Status CheckRopeConfig(const ModelConfig& c) {
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0) {
    return Invalid("dimension count", c.rope_dim, "a positive even number");
  }
  if (!(c.rope_freq_base > 0) || !std::isfinite(c.rope_freq_base)) {
    return Invalid("freq_base", c.rope_freq_base, "a finite positive number");
  }
  if (!(c.rope_scaling_factor > 0) || !std::isfinite(c.rope_scaling_factor)) {
    return Invalid("scaling factor", c.rope_scaling_factor,
                   "a finite positive number");
  }
  if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor)) {
    return Invalid("attn_factor", c.rope_attn_factor,
                   "a finite positive number");
  }
  if (c.rope_scaling != RopeScaling::kYarn) return absl::OkStatus();
  if (c.rope_original_context <= 0) {
    return Invalid("yarn original context length",
                   static_cast<double>(c.rope_original_context), "> 0");
  }
  if (!(c.yarn_ext_factor >= 0 && c.yarn_ext_factor <= 1)) {
    return Invalid("yarn ext_factor", c.yarn_ext_factor, "0 to 1");
  }
  if (!(c.yarn_attn_factor >= 0) || !std::isfinite(c.yarn_attn_factor)) {
    return Invalid("yarn attn_factor", c.yarn_attn_factor,
                   "0 (derived) or a finite positive number");
  }
  if (!(c.yarn_beta_slow > 0) || !(c.yarn_beta_fast >= c.yarn_beta_slow) ||
      !std::isfinite(c.yarn_beta_fast)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rope yarn beta_fast ", c.yarn_beta_fast, " and beta_slow ",
        c.yarn_beta_slow, ": want 0 < beta_slow <= beta_fast"));
  }
  return absl::OkStatus();
}

RopeTable MakeRopeTable(const ModelConfig& c,
                        absl::Span<const float> freq_factors) {
  const size_t half = static_cast<size_t>(c.rope_dim / 2);
  RopeTable t;
  t.inv_freq.resize(half);
  t.mscale = c.rope_attn_factor;
  double scale = 1;  // s of the header
  if (c.rope_scaling != RopeScaling::kNone) scale = 1 / c.rope_scaling_factor;
  std::vector<double> mix(half, 0.0);
  if (c.rope_scaling == RopeScaling::kYarn) {
    mix = YarnMix(c);
    t.mscale *= YarnMagnitude(c);
  }
  for (size_t i = 0; i < half; ++i) {
    double f =
        std::pow(c.rope_freq_base, -2.0 * static_cast<double>(i) / c.rope_dim);
    if (!freq_factors.empty()) f /= freq_factors[i];
    t.inv_freq[i] = f * (scale * (1 - mix[i]) + mix[i]);
  }
  return t;
}

}  // namespace paceline::engine
