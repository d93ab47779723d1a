#ifndef PACELINE_ENGINE_CPU_DELTA_NET_H_
#define PACELINE_ENGINE_CPU_DELTA_NET_H_

// The recurrent half of a Gated DeltaNet layer (model/layer_program.h's
// kDeltaNet) for one sequence's tokens, after the input projections and
// before the output projection: the causal convolution with its state,
// and per value head the gated delta rule over the head's state matrix
// with the gated RMSNorm of its output. As llama.cpp computes them
// (src/models/delta-net-base.cpp, qwen35.cpp, qwen3next.cpp) in their
// autoregressive form, a token at a time, for prefill and decode alike:
// the engine runs DeltaNetHeadLanes, the scan with its dot products in 16
// lanes; DeltaNetHead keeps ggml's summation order (the reference of the
// tests and the benchmark). bench/RESULTS.md ("Gated DeltaNet: the scan
// against the chunked form") measured the chunked form (the WY / UT
// transform) against both: the 16-lane scan is as fast or faster on this
// CPU, and it keeps a sequence's result independent of how its tokens are
// split into steps (a cached prefix's state equals a cold run's).
//
// Plain loops over float rows; none allocates.

#include <cstdint>

namespace paceline::engine::cpu {

struct DeltaNetShape {
  int64_t conv_kernel = 0;  // taps K
  int64_t k_heads = 0;      // key (and query) heads
  int64_t v_heads = 0;      // value heads, a multiple of k_heads
  int64_t head_dim = 0;     // key and value head size d
  bool grouped = false;     // value head h reads key head h / (v/k), else h % k
  float eps = 1e-6f;        // L2 norms and the output RMSNorm

  int64_t conv_dim() const { return (2 * k_heads + v_heads) * head_dim; }
  int64_t KeyHead(int64_t v) const {
    return grouped ? v / (v_heads / k_heads) : v % k_heads;
  }
};

// The causal depthwise convolution and SiLU over n tokens: out row t,
// channel c = silu(sum_j in[t + j - (K-1), c] · w[c·K + j]) where in[-i]
// is the state's row K-1-i (the state holds the last K-1 inputs, oldest
// first); then the state becomes the last K-1 inputs. out may not alias x.
//   state:  (K-1, conv_dim)
//   w:      (conv_dim, K)
//   x, out: (n, conv_dim)
void DeltaNetConv(const DeltaNetShape& shape, const float* w, float* state,
                  const float* x, int64_t n, float* out);

// The gated delta rule of value head `v` over n tokens, then the head's
// gated RMSNorm:
//   q, k = L2-normalised query and key rows of key head KeyHead(v) (taken
//          from `conv`, the convolution's output: q heads, k heads, then v
//          heads), q scaled by 1/sqrt(d);
//   S ← exp(g_t) S;  S ← S + beta_t (v_t − S k) kᵀ;  o_t = S q
//   out_t = RMSNorm(o_t) · norm · silu(z_t)
// with beta_t = sigmoid(b[t, v]) and g_t = softplus(a[t, v] + dt_bias[v]) ·
// ssm_a[v]. S is the head's (d, d) state, row i for output feature i.
//   conv: (n, conv_dim)     b, a: (n, v_heads), row stride ba_stride
//   z:    (n, v_heads · d)  out: (n, v_heads · d) (head v's columns written)
struct DeltaNetHeadArgs {
  const float* conv = nullptr;
  const float* b = nullptr;
  const float* a = nullptr;
  int64_t ba_stride = 0;
  const float* z = nullptr;
  const float* ssm_a = nullptr;
  const float* dt_bias = nullptr;
  const float* norm = nullptr;  // (d)
};
void DeltaNetHead(const DeltaNetShape& shape, const DeltaNetHeadArgs& args,
                  int64_t v, int64_t n, float* state, float* out);

// DeltaNetHead with its two dot products per state row summed in 16 lanes
// (head sizes a multiple of 16; others as DeltaNetHead), which the compiler
// vectorizes: 2.3-3x faster at -O2 on x86-64 (bench/RESULTS.md). What the
// engine runs.
void DeltaNetHeadLanes(const DeltaNetShape& shape,
                       const DeltaNetHeadArgs& args, int64_t v, int64_t n,
                       float* state, float* out);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_DELTA_NET_H_
