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

// y_r[0, n) = sum_j a_r[j] b[j, 0 .. n) for the R vectors a_r (length
// kdim; b is (kdim, n) with row stride ldb; n a multiple of 16), a block of
// 16 columns at a time: the block's R accumulators stay in registers over
// the whole sum, each row block of b is loaded once for all R, and the
// fixed 16-float inner loop is one that -O2's vectorizer (GCC's "very
// cheap" model: no runtime alias checks, no scalar remainder) takes. Where
// `add`, y_r += instead of =.
template <int R>
void RowsTimes(const float* const (&a)[R], const float* b, int64_t kdim,
               int64_t ldb, int64_t n, float* const (&y)[R], bool add) {
  for (int64_t c0 = 0; c0 < n; c0 += 16) {
    float acc[R][16] = {};
    for (int64_t j = 0; j < kdim; ++j) {
      const float* row = b + j * ldb + c0;
      for (int r = 0; r < R; ++r) {
        const float x = a[r][j];
#pragma GCC unroll 16
        for (int l = 0; l < 16; ++l) acc[r][l] += x * row[l];
      }
    }
    for (int r = 0; r < R; ++r) {
      float* dst = y[r] + c0;
      if (add) {
        for (int l = 0; l < 16; ++l) dst[l] += acc[r][l];
      } else {
        for (int l = 0; l < 16; ++l) dst[l] = acc[r][l];
      }
    }
  }
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

int64_t DeltaNetChunkedScratchFloats(int64_t head_dim, int64_t chunk) {
  return head_dim * head_dim + 5 * chunk * head_dim + 2 * chunk * chunk +
         2 * chunk;
}

void DeltaNetHeadChunked(const DeltaNetShape& shape,
                         const DeltaNetHeadArgs& args, int64_t v, int64_t n,
                         int64_t chunk, float* state, float* out,
                         float* scratch) {
  const int64_t d = shape.head_dim;
  const int64_t c = shape.conv_dim();
  const int64_t kh = shape.KeyHead(v);
  const int64_t cs = chunk;
  const int64_t vd = shape.v_heads * d;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* st = scratch;       // (d, d) the state transposed: st[j d + i] = S[i, j]
  float* q = st + d * d;     // (C, d) the chunk's normalised queries
  float* k = q + cs * d;     // (C, d) its normalised keys
  float* kt = k + cs * d;    // (d, C) the keys transposed
  float* u = kt + d * cs;    // (C, d) beta_t (v_t - e^G_t S k_t), then u_t
  float* o = u + cs * d;     // (C, d) the outputs before the norm
  float* kk = o + cs * d;    // (C, C) beta_t e^(G_t - G_s) k_t.k_s, s < t
  float* qk = kk + cs * cs;  // (C, C) e^(G_t - G_s) q_t.k_s, s <= t
  float* beta = qk + cs * cs;  // (C) beta_t, then e^(G_last - G_s)
  float* g = beta + cs;        // (C) G_t, the cumulative log-decay
  // The state transposed, so that each product with it below is an axpy
  // over its contiguous rows (row j: key feature j's column of S).
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j) st[j * d + i] = state[i * d + j];
  }
  for (int64_t t0 = 0; t0 < n; t0 += cs) {
    const int64_t m = std::min(cs, n - t0);
    // A short chunk's rows below are rounded up to 16 columns of kt: keep
    // the columns past m finite.
    if (m < cs) std::fill(kt, kt + d * cs, 0.0f);
    float cum = 0;
    for (int64_t t = 0; t < m; ++t) {
      const float* row = args.conv + (t0 + t) * c;
      L2Normalize(row + kh * d, d, shape.eps, q_scale, q + t * d);
      L2Normalize(row + (shape.k_heads + kh) * d, d, shape.eps, 1.0f,
                  k + t * d);
      const int64_t ba = (t0 + t) * args.ba_stride + v;
      beta[t] = 1.0f / (1.0f + std::exp(-args.b[ba]));
      cum += Softplus(args.a[ba] + args.dt_bias[v]) * args.ssm_a[v];
      g[t] = cum;
      for (int64_t j = 0; j < d; ++j) kt[j * cs + t] = k[t * d + j];
    }
    // From the chunk's starting state: u_t's right-hand side and the
    // outputs' inter-chunk part e^G_t S q_t.
    for (int64_t t = 0; t < m; ++t) {
      float* ut = u + t * d;
      float* ot = o + t * d;
      RowsTimes<2>({k + t * d, q + t * d}, st, d, d, d, {ut, ot}, false);
      const float* val = args.conv + (t0 + t) * c + (2 * shape.k_heads + v) * d;
      const float decay = std::exp(g[t]);
      for (int64_t i = 0; i < d; ++i) {
        ut[i] = beta[t] * (val[i] - decay * ut[i]);
        ot[i] *= decay;
      }
    }
    // The decay-masked key-key and query-key products, row t over columns
    // s <= t (rounded up to 16; the rest unused).
    for (int64_t t = 0; t < m; ++t) {
      const int64_t len = (t + 16) & ~int64_t{15};
      float* kkt = kk + t * cs;
      float* qkt = qk + t * cs;
      RowsTimes<2>({k + t * d, q + t * d}, kt, d, cs, len, {kkt, qkt}, false);
      for (int64_t s = 0; s <= t; ++s) {
        const float w = std::exp(g[t] - g[s]);
        kkt[s] *= -beta[t] * w;
        qkt[s] *= w;
      }
    }
    // (I + strictly lower kk) U = rhs by forward substitution (kk negated
    // above), then the outputs' intra-chunk part.
    for (int64_t t = 1; t < m; ++t) {
      RowsTimes<1>({kk + t * cs}, u, t, d, d, {u + t * d}, true);
    }
    for (int64_t t = 0; t < m; ++t) {
      RowsTimes<1>({qk + t * cs}, u, t + 1, d, d, {o + t * d}, true);
    }
    // The state at the chunk's end: kt's column s scaled by e^(G_last -
    // G_s) first.
    const float last = g[m - 1];
    for (int64_t s = 0; s < m; ++s) beta[s] = std::exp(last - g[s]);
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t s = 0; s < m; ++s) kt[j * cs + s] *= beta[s];
    }
    const float decay = std::exp(last);
    for (int64_t j = 0; j < d * d; ++j) st[j] *= decay;
    for (int64_t j = 0; j < d; ++j) {
      RowsTimes<1>({kt + j * cs}, u, m, d, d, {st + j * d}, true);
    }
    for (int64_t t = 0; t < m; ++t) {
      const int64_t at = (t0 + t) * vd + v * d;
      GatedRmsNorm(o + t * d, args.z + at, args.norm, d, shape.eps, out + at);
    }
  }
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j) state[i * d + j] = st[j * d + i];
  }
}

}  // namespace paceline::engine::cpu
