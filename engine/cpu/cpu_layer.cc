// The CPU engine's layer operations (model/layer_program.h): RunLayer runs
// a layer's program, each operation once here for every architecture.

#include <cmath>
#include <cstring>

#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/kernels/attention.h"

namespace paceline::engine::cpu {

absl::Status CpuEngine::RunLayer(int64_t layer, int64_t n) {
  for (const Op& op : programs_[layer].ops) {
    RETURN_IF_ERROR(RunOp(op, layer, n));
  }
  return absl::OkStatus();
}

absl::Status CpuEngine::RunOp(const Op& op, int64_t layer, int64_t n) {
  switch (op.kind) {
    case OpKind::kRmsNorm:
      RmsNormRows(op, layer, n);
      return absl::OkStatus();
    case OpKind::kQkvRope:
      return QkvRope(op, layer, n);
    case OpKind::kAttention:
      Attention(op, layer, n);
      return absl::OkStatus();
    case OpKind::kMatMul: {
      if (op.weight != Weight::kAttnOutput) {
        return absl::InternalError("kMatMul of a weight that is no matrix");
      }
      const int64_t embd = config().n_embd;
      float* out = op.accumulate ? proj_.data() : Rows(op.dst);
      RETURN_IF_ERROR(MatMul(Matrix(op.weight, layer), Rows(op.src), n, out));
      if (op.bias) {  // the only matrix with a bias: attn_output's
        const float* bias = weights_->layers()[layer].o_bias.data();
        ForRows(n, embd, [&](int64_t b, int64_t e) {
          AddBias(&out[b * embd], bias, e - b, embd);
        });
      }
      if (op.accumulate) AddRows(Buf::kProj, op.dst, n);
      return absl::OkStatus();
    }
    case OpKind::kAdd:
      AddRows(op.src, op.dst, n);
      return absl::OkStatus();
    case OpKind::kFeedForward:
      return FeedForward(op, layer, n);
    case OpKind::kDeltaNet:
      return DeltaNet(op, layer, n);
  }
  return absl::InternalError("unknown layer operation");
}

float* CpuEngine::Rows(Buf buf) {
  switch (buf) {
    case Buf::kX:
      return x_.data();
    case Buf::kH:
      return h_.data();
    case Buf::kAtt:
      return att_.data();
    case Buf::kProj:
      return proj_.data();
  }
  return nullptr;
}

const std::vector<float>& CpuEngine::NormWeights(Weight w,
                                                 int64_t layer) const {
  const LayerWeights& l = weights_->layers()[layer];
  switch (w) {
    case Weight::kAttnNorm:
      return l.attn_norm;
    case Weight::kFfnNorm:
      return l.ffn_norm;
    case Weight::kPostAttnNorm:
      return l.post_attn_norm;
    case Weight::kPostFfnNorm:
      return l.post_ffn_norm;
    case Weight::kAttnOutput:
      break;  // a matrix: LayerPrograms' descriptions never norm with it
  }
  static const std::vector<float>* const none = new std::vector<float>();
  return *none;
}

// Weight::kAttnOutput, the only matrix a description multiplies by alone
// (Q/K/V and the FFN's belong to their operations; RunOp checks).
const WeightView& CpuEngine::Matrix(Weight, int64_t layer) const {
  return matrices_[layer].o;
}

void CpuEngine::RmsNormRows(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const int64_t embd = c.n_embd;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float* weight = NormWeights(op.weight, layer).data();
  const float* src = Rows(op.src);
  float* dst = Rows(op.dst);
  ForRows(n, embd, [&](int64_t b, int64_t e) {
    RmsNorm(&src[b * embd], weight, e - b, embd, eps, &dst[b * embd]);
  });
}

absl::Status CpuEngine::QkvRope(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layers()[layer];
  const LayerMatrices& m = matrices_[layer];
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t hd = c.head_dim;
  const int64_t q_dim = c.n_heads * hd;
  const int64_t kv_dim = c.n_kv_heads * hd;
  const int64_t half = c.rope_dim / 2;
  RETURN_IF_ERROR(
      MatMuls({m.q, m.k, m.v}, Rows(op.src), n,
              {op.output_gate ? qg_.data() : q_.data(), k_.data(), v_.data()}));
  ForRows(n, q_dim, [&](int64_t b, int64_t e) {
    if (op.output_gate) SplitQueryGate(b, e);
    float* q = &q_[b * q_dim];
    float* k = &k_[b * kv_dim];
    if (op.qkv_bias) {
      AddBias(q, w.q_bias.data(), e - b, q_dim);
      AddBias(k, w.k_bias.data(), e - b, kv_dim);
      AddBias(&v_[b * kv_dim], w.v_bias.data(), e - b, kv_dim);
    }
    if (op.qk_norm) {
      RmsNorm(q, w.q_norm.data(), (e - b) * c.n_heads, hd, eps, q);
      RmsNorm(k, w.k_norm.data(), (e - b) * c.n_kv_heads, hd, eps, k);
    }
    const RopeParams& rope = op.local_rope ? rope_swa_ : rope_;
    const float* cos = &(op.local_rope ? cos_swa_ : cos_)[b * half];
    const float* sin = &(op.local_rope ? sin_swa_ : sin_)[b * half];
    ApplyRope(q, e - b, c.n_heads, hd, rope, cos, sin);
    ApplyRope(k, e - b, c.n_kv_heads, hd, rope, cos, sin);
  });
  WriteKv(layer, n);
  return absl::OkStatus();
}

void CpuEngine::Attention(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  AttentionParams params;
  params.n_heads = c.n_heads;
  params.n_kv_heads = c.n_kv_heads;
  params.head_dim = c.head_dim;
  params.scale = static_cast<float>(
      c.attention_scale != 0
          ? c.attention_scale
          : 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  params.window = op.window;
  if (op.sinks) params.sinks = weights_->layers()[layer].attn_sinks.data();
  PagedAttention(*cache_, kv_layout_.slot_of_layer[layer], params, q_.data(),
                 n, positions_.data(), token_table_.data(),
                 block_tables_[kv_layout_.group_of_layer[layer]], att_.data(),
                 pool_);
  if (!op.output_gate) return;
  const int64_t q_dim = c.n_heads * c.head_dim;
  ForRows(n, q_dim, [&](int64_t b, int64_t e) {
    for (int64_t i = b * q_dim; i < e * q_dim; ++i) {
      att_[i] *= 1.0f / (1.0f + std::exp(-attn_gate_[i]));
    }
  });
}

// Rows [b, e) of qg_ (per head: head_dim query values, then head_dim gate
// values) into q_ and attn_gate_.
void CpuEngine::SplitQueryGate(int64_t b, int64_t e) {
  const ModelConfig& c = config();
  const int64_t hd = c.head_dim;
  const size_t bytes = static_cast<size_t>(hd) * sizeof(float);
  for (int64_t t = b; t < e; ++t) {
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const float* src = &qg_[(t * c.n_heads + h) * 2 * hd];
      std::memcpy(&q_[(t * c.n_heads + h) * hd], src, bytes);
      std::memcpy(&attn_gate_[(t * c.n_heads + h) * hd], src + hd, bytes);
    }
  }
}

void CpuEngine::AddRows(Buf from, Buf to, int64_t n) {
  const int64_t embd = config().n_embd;
  const float* src = Rows(from);
  float* dst = Rows(to);
  ForRows(n, embd, [&](int64_t b, int64_t e) {
    AddInPlace(&dst[b * embd], &src[b * embd], (e - b) * embd);
  });
}

absl::Status CpuEngine::FeedForward(const Op& op, int64_t layer, int64_t n) {
  RETURN_IF_ERROR(FeedForwardInto(op, layer, n,
                                  op.accumulate ? proj_.data() : Rows(op.dst)));
  if (op.accumulate) AddRows(Buf::kProj, op.dst, n);
  return absl::OkStatus();
}

absl::Status CpuEngine::FeedForwardInto(const Op& op, int64_t layer, int64_t n,
                                        float* out) {
  const LayerMatrices& m = matrices_[layer];
  const float* src = Rows(op.src);
  if (op.moe) {  // mixture of experts (moe_ffn.h)
    const LayerWeights& w = weights_->layers()[layer];
    const auto data = [](const std::vector<float>& v) {
      return v.empty() ? nullptr : v.data();
    };
    const MoeBiases biases{.router = data(w.router_bias),
                           .gate = data(w.gate_exps_bias),
                           .up = data(w.up_exps_bias),
                           .down = data(w.down_exps_bias)};
    RETURN_IF_ERROR(
        moe_->Run(m.moe, biases, src, n, out, pool_, matmul_scratch_));
    last_step_weight_bytes_ += moe_->last_run_bytes() - m.moe.router.bytes();
    if (m.gate_shexp.rows == 0) return absl::OkStatus();
    return SharedExpert(layer, src, n, out);
  }
  RETURN_IF_ERROR(MatMuls({m.gate, m.up}, src, n, {gate_.data(), up_.data()}));
  const int64_t ff = config().n_ff;
  ForRows(n, ff, [&](int64_t b, int64_t e) {
    GatedActivation(op.activation, &gate_[b * ff], &up_[b * ff],
                    (e - b) * ff, &gate_[b * ff]);
  });
  return MatMul(m.down, gate_.data(), n, out);
}

}  // namespace paceline::engine::cpu
