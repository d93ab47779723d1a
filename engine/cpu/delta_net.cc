#include "engine/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace paceline::engine::cpu {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// ggml's softplus: x itself above 20, where log1p(exp(x)) rounds to it.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / max(||x||, eps), ggml_l2_norm's rule.
void L2Normalize(const float* x, int64_t d, float eps, float scale,
                 float* out) {
  float sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += x[i] * x[i];
  const float s = scale / std::max(std::sqrt(sum), eps);
  for (int64_t i = 0; i < d; ++i) out[i] = x[i] * s;
}

}  // namespace

void DeltaNetConv(const DeltaNetShape& shape, const float* w, float* state,
                  const float* x, int64_t n, float* out) {
  const int64_t c = shape.conv_dim();
  const int64_t k = shape.conv_kernel;
  // Input row i of the window: the state's for i < 0.
  const auto in = [&](int64_t i) {
    return i < 0 ? state + (k - 1 + i) * c : x + i * c;
  };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * c;
    std::fill(o, o + c, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float* r = in(t + j - (k - 1));
      for (int64_t ch = 0; ch < c; ++ch) o[ch] += r[ch] * w[ch * k + j];
    }
    for (int64_t ch = 0; ch < c; ++ch) o[ch] = Silu(o[ch]);
  }
  // The last K-1 inputs, oldest first; rows still in the state move down
  // first (i ascending reads rows at or after the one it writes).
  const size_t row = static_cast<size_t>(c) * sizeof(float);
  for (int64_t i = 0; i < k - 1; ++i) {
    const int64_t src = n - (k - 1) + i;
    if (src < 0) std::memmove(state + i * c, in(src), row);
    else std::memcpy(state + i * c, x + src * c, row);
  }
}

void DeltaNetHead(const DeltaNetShape& shape, const DeltaNetHeadArgs& args,
                  int64_t v, int64_t n, float* state, float* out) {
  const int64_t d = shape.head_dim;
  const int64_t c = shape.conv_dim();
  const int64_t kh = shape.KeyHead(v);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  float q[1024], k[1024], o[1024];  // d <= 1024 (ModelConfig's bound)
  for (int64_t t = 0; t < n; ++t) {
    const float* row = args.conv + t * c;
    L2Normalize(row + kh * d, d, shape.eps, q_scale, q);
    L2Normalize(row + (shape.k_heads + kh) * d, d, shape.eps, 1.0f, k);
    const float* val = row + (2 * shape.k_heads + v) * d;
    const float beta =
        1.0f / (1.0f + std::exp(-args.b[t * args.ba_stride + v]));
    const float decay = std::exp(
        Softplus(args.a[t * args.ba_stride + v] + args.dt_bias[v]) *
        args.ssm_a[v]);
    for (int64_t i = 0; i < d; ++i) {
      float* s = state + i * d;
      float sk = 0;
      for (int64_t j = 0; j < d; ++j) sk += s[j] * k[j];
      const float delta = beta * (val[i] - decay * sk);
      float sq = 0;
      for (int64_t j = 0; j < d; ++j) {
        s[j] = decay * s[j] + delta * k[j];
        sq += s[j] * q[j];
      }
      o[i] = sq;
    }
    // RMSNorm(o) · norm · silu(z) for this head.
    float ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += o[i] * o[i];
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(d) + shape.eps);
    const float* z = args.z + t * shape.v_heads * d + v * d;
    float* dst = out + t * shape.v_heads * d + v * d;
    for (int64_t i = 0; i < d; ++i) {
      dst[i] = o[i] * r * args.norm[i] * Silu(z[i]);
    }
  }
}

}  // namespace paceline::engine::cpu
