// The CPU engine's hybrid-model operations (model/layer_program.h): a
// Gated DeltaNet layer over each slice's state slot (the recurrence in
// delta_net.h), and the MoE's gated shared expert.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/delta_net.h"

namespace paceline::engine::cpu {

absl::Status CpuEngine::DeltaNet(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layers()[layer];
  const LayerMatrices& m = matrices_[layer];
  const int64_t nv = c.ssm_v_heads;
  const int64_t conv = c.ssm_conv_dim();
  const int64_t inner = c.ssm_value_dim();
  const float* src = Rows(op.src);
  // Projections: q/k/v (convolved below), the output gate z, beta and
  // alpha (two matrices, or one laid out per key head). ssm_ba_ holds the
  // n beta rows, then the n alpha rows.
  float* beta = ssm_ba_.data();
  float* alpha = beta + n * nv;
  if (c.ssm_fused_ba) {
    RETURN_IF_ERROR(MatMuls({m.ssm_qkv, m.ssm_z, m.ssm_ba}, src, n,
                            {ssm_qkv_.data(), ssm_z_.data(), ssm_o_.data()}));
    // Key head g's 2r values: r betas, then r alphas (r = nv / k heads),
    // for value heads g r .. g r + r - 1.
    const int64_t r = nv / c.ssm_k_heads;
    for (int64_t t = 0; t < n; ++t) {
      const float* ba = &ssm_o_[t * 2 * nv];
      for (int64_t g = 0; g < c.ssm_k_heads; ++g) {
        for (int64_t j = 0; j < r; ++j) {
          beta[t * nv + g * r + j] = ba[g * 2 * r + j];
          alpha[t * nv + g * r + j] = ba[g * 2 * r + r + j];
        }
      }
    }
  } else {
    RETURN_IF_ERROR(MatMuls({m.ssm_qkv, m.ssm_z, m.ssm_beta, m.ssm_alpha}, src,
                            n, {ssm_qkv_.data(), ssm_z_.data(), beta, alpha}));
  }
  DeltaNetShape shape;
  shape.conv_kernel = c.ssm_conv_kernel;
  shape.k_heads = c.ssm_k_heads;
  shape.v_heads = nv;
  shape.head_dim = c.ssm_state_size;
  shape.grouped = c.ssm_grouped_heads;
  shape.eps = static_cast<float>(c.rms_norm_eps);
  const int64_t conv_floats = (c.ssm_conv_kernel - 1) * conv;
  const int64_t head_floats = c.ssm_state_size * c.ssm_state_size;
  const int64_t slices = static_cast<int64_t>(slices_.size());
  // The convolution, a slice at a time (a fresh sequence's state zeroed
  // first: its matrices too).
  pool_.ParallelFor(slices, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      const SequenceSlice& slice = slices_[s];
      float* state = State(slice.state_slot, layer);
      if (slice.position_begin == 0) {
        std::fill(state, state + c.RecurrentStateFloats(), 0.0f);
      }
      const int64_t t0 = slice.token_begin;
      DeltaNetConv(shape, w.ssm_conv1d.data(), state, &ssm_qkv_[t0 * conv],
                   slice.token_count, &ssm_conv_[t0 * conv]);
    }
  });
  // The recurrence, a (slice, value head) at a time.
  DeltaNetHeadArgs args;
  args.ba_stride = nv;
  args.z = nullptr;
  args.ssm_a = w.ssm_a.data();
  args.dt_bias = w.ssm_dt_bias.data();
  args.norm = w.ssm_norm.data();
  pool_.ParallelFor(slices * nv, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const SequenceSlice& slice = slices_[i / nv];
      const int64_t v = i % nv;
      const int64_t t0 = slice.token_begin;
      DeltaNetHeadArgs a = args;
      a.conv = &ssm_conv_[t0 * conv];
      a.b = beta + t0 * nv;
      a.a = alpha + t0 * nv;
      a.z = &ssm_z_[t0 * inner];
      float* heads = State(slice.state_slot, layer) + conv_floats;
      DeltaNetHeadLanes(shape, a, v, slice.token_count, heads + v * head_floats,
                        &ssm_o_[t0 * inner]);
    }
  });
  return MatMul(m.ssm_out, ssm_o_.data(), n, Rows(op.dst));
}

absl::Status CpuEngine::SharedExpert(int64_t layer, const float* src, int64_t n,
                                     float* out) {
  const ModelConfig& c = config();
  const LayerMatrices& m = matrices_[layer];
  const std::vector<float>& gate_w =
      weights_->layers()[layer].ffn_gate_inp_shexp;
  const int64_t ff = c.n_ff_shexp;
  const int64_t embd = c.n_embd;
  RETURN_IF_ERROR(
      MatMuls({m.gate_shexp, m.up_shexp}, src, n, {gate_.data(), up_.data()}));
  ForRows(n, ff, [&](int64_t b, int64_t e) {
    SwiGlu(&gate_[b * ff], &up_[b * ff], (e - b) * ff, &gate_[b * ff]);
  });
  RETURN_IF_ERROR(MatMul(m.down_shexp, gate_.data(), n, shexp_.data()));
  for (int64_t t = 0; t < n; ++t) {
    const float* x = src + t * embd;
    float logit = 0;
    for (int64_t i = 0; i < embd; ++i) logit += x[i] * gate_w[i];
    const float scale = 1.0f / (1.0f + std::exp(-logit));
    float* o = out + t * embd;
    const float* sh = &shexp_[t * embd];
    for (int64_t i = 0; i < embd; ++i) o[i] += scale * sh[i];
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine::cpu
