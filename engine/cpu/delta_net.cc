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

// x·y over n floats (a multiple of 16) in 16 lanes, the lanes summed at the
// end: the float reduction -O2 leaves scalar (it may not reorder it) turned
// into 16 independent ones that it vectorizes.
float Dot16(const float* x, const float* y, int64_t n) {
  float acc[16] = {};
  for (int64_t j = 0; j < n; j += 16) {
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) acc[l] += x[j + l] * y[j + l];
  }
  float sum = 0;
  for (int l = 0; l < 16; ++l) sum += acc[l];
  return sum;
}

// s = decay·s + delta·k over n floats (a multiple of 16); returns the new
// s·q, in 16 lanes as Dot16.
float UpdateDot16(float* s, const float* k, const float* q, float decay,
                  float delta, int64_t n) {
  float acc[16] = {};
  for (int64_t j = 0; j < n; j += 16) {
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) {
      const float x = decay * s[j + l] + delta * k[j + l];
      s[j + l] = x;
      acc[l] += x * q[j + l];
    }
  }
  float sum = 0;
  for (int l = 0; l < 16; ++l) sum += acc[l];
  return sum;
}

// Row s of a head's state over one token: s ← decay·s + beta (v_i −
// decay·s·k) k; returns the new s·q. kLanes (head sizes a multiple of 16):
// the two dot products in 16 lanes; else in order, as ggml sums them.
template <bool kLanes>
float ScanRow(float* s, const float* k, const float* q, float v_i, float beta,
              float decay, int64_t d) {
  if (kLanes) {
    const float delta = beta * (v_i - decay * Dot16(s, k, d));
    return UpdateDot16(s, k, q, decay, delta, d);
  }
  float sk = 0;
  for (int64_t j = 0; j < d; ++j) sk += s[j] * k[j];
  const float delta = beta * (v_i - decay * sk);
  float sq = 0;
  for (int64_t j = 0; j < d; ++j) {
    s[j] = decay * s[j] + delta * k[j];
    sq += s[j] * q[j];
  }
  return sq;
}

// One head's output row: RMSNorm(o) · norm · silu(z).
void GatedRmsNorm(const float* o, const float* z, const float* norm,
                  int64_t d, float eps, float* dst) {
  float ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += o[i] * o[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
  for (int64_t i = 0; i < d; ++i) dst[i] = o[i] * r * norm[i] * Silu(z[i]);
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

namespace {

template <bool kLanes>
void Scan(const DeltaNetShape& shape, const DeltaNetHeadArgs& args, int64_t v,
          int64_t n, float* state, float* out) {
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
      o[i] = ScanRow<kLanes>(state + i * d, k, q, val[i], beta, decay, d);
    }
    const int64_t at = t * shape.v_heads * d + v * d;
    GatedRmsNorm(o, args.z + at, args.norm, d, shape.eps, out + at);
  }
}

}  // namespace

void DeltaNetHead(const DeltaNetShape& shape, const DeltaNetHeadArgs& args,
                  int64_t v, int64_t n, float* state, float* out) {
  Scan<false>(shape, args, v, n, state, out);
}

void DeltaNetHeadLanes(const DeltaNetShape& shape,
                       const DeltaNetHeadArgs& args, int64_t v, int64_t n,
                       float* state, float* out) {
  if (shape.head_dim % 16 == 0) {
    Scan<true>(shape, args, v, n, state, out);
  } else {
    Scan<false>(shape, args, v, n, state, out);
  }
}

}  // namespace paceline::engine::cpu
