#include "engine/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "engine/cpu/kernels/vector_math.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu {

void RmsNorm(const float* x, const float* w, int64_t n_rows, int64_t dim,
             float eps, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(
        1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * w[i];
  }
}

void AddBias(float* x, const float* bias, int64_t n_rows, int64_t dim) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* xr = x + r * dim;
    for (int64_t i = 0; i < dim; ++i) xr[i] += bias[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  // exp(-g) a chunk at a time through the vectorized exp (the scalar
  // std::exp was ~2 % of a decode step), then the same float formula.
  constexpr int64_t kChunk = 256;
  float e[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < m; ++i) e[i] = -gate[i0 + i];
    ExpRow(e, m, e);
    for (int64_t i = 0; i < m; ++i) {
      out[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
    }
  }
}

void GeluTanhGlu(const float* gate, const float* up, int64_t n, float* out) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    if (g <= -10.0f) {
      out[i] = 0.0f;
      continue;
    }
    if (g >= 10.0f) {
      out[i] = g * up[i];
      continue;
    }
    const float x = HalfToFloat(FloatToHalf(g));
    const float gelu =
        0.5f * x * (1.0f + std::tanh(k * x * (1.0f + 0.044715f * x * x)));
    out[i] = HalfToFloat(FloatToHalf(gelu)) * up[i];
  }
}

void SwigluOai(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kAlpha = 1.702f;
  constexpr float kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    out[i] = g / (1.0f + std::exp(kAlpha * -g)) * (u + 1.0f);
  }
}

void GatedActivation(FfnActivation activation, const float* gate,
                     const float* up, int64_t n, float* out) {
  switch (activation) {
    case FfnActivation::kSilu:
      SwiGlu(gate, up, n, out);
      return;
    case FfnActivation::kGeluTanh:
      GeluTanhGlu(gate, up, n, out);
      return;
    case FfnActivation::kSwigluOai:
      SwigluOai(gate, up, n, out);
      return;
  }
}

RopeParams SlidingRopeParams(const ModelConfig& config) {
  ModelConfig sliding = config;
  sliding.rope_freq_base = config.rope_freq_base_swa;
  sliding.rope_scaling = RopeScaling::kNone;
  sliding.rope_scaling_factor = 1.0;
  return RopeParamsFromConfig(sliding);
}

RopeParams RopeParamsFromConfig(const ModelConfig& config,
                                absl::Span<const float> freq_factors) {
  RopeParams p;
  p.layout = config.rope_layout;
  p.rope_dim = config.rope_dim;
  p.table = MakeRopeTable(config, freq_factors);
  return p;
}

void RopeAngles(const int32_t* positions, int64_t n_tokens,
                const RopeParams& params, float* cos, float* sin) {
  const int64_t half = params.rope_dim / 2;
  const double mscale = params.table.mscale;
  for (int64_t i = 0; i < half; ++i) {
    const double freq = params.table.inv_freq[i];
    for (int64_t t = 0; t < n_tokens; ++t) {
      const double theta = positions[t] * freq;
      cos[t * half + i] = static_cast<float>(mscale * std::cos(theta));
      sin[t * half + i] = static_cast<float>(mscale * std::sin(theta));
    }
  }
}

void ApplyRope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
               const RopeParams& params, const float* cos, const float* sin) {
  const int64_t half = params.rope_dim / 2;
  // Pair i of a head is (x[i * stride], x[i * stride + offset]).
  const bool adjacent = params.layout == RopeLayout::kAdjacentPairs;
  const int64_t stride = adjacent ? 2 : 1;
  const int64_t offset = adjacent ? 1 : half;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i * stride];
        const float b = v[i * stride + offset];
        v[i * stride] = a * c[i] - b * s[i];
        v[i * stride + offset] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace paceline::engine::cpu
