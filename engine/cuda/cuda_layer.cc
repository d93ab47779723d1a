// The CUDA engine's layer operations (model/layer_program.h): RunLayer runs
// a layer's program, each operation once here for every architecture. The
// buffers: x_ (float) is Buf::kX, proj_ (float) Buf::kProj, h_ (T) Buf::kH,
// att_ (T) Buf::kAtt. A matmul or feed-forward that accumulates into a
// float buffer adds in its last GEMM (beta 1: llama's residual add); an
// add runs in one kernel with the in-place norm of its source before it
// and the norm of its destination after it when the program has them there
// (gemma3's post-norm, residual add and next pre-norm). A DeltaNet layer
// and the hybrids' gates are in cuda_delta_net.cc. CheckPrograms
// refuses at creation what the engine does not run: a mixture of experts
// that is not added into x, norms or adds of T buffers, matmuls into them.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/gates.h"
#include "engine/cuda/kernels/paged_attention.h"
#include "engine/cuda/kernels/qkv_rope.h"
#include "engine/cuda/kernels/rms_norm.h"
#include "engine/cuda/kernels/scale.h"
#include "engine/cuda/kernels/swiglu.h"

namespace paceline::engine::cuda {
namespace {

// The float step buffers (the others hold T).
bool IsFloat(Buf b) { return b == Buf::kX || b == Buf::kProj; }
bool IsNormWeight(Weight w) {
  return w == Weight::kAttnNorm || w == Weight::kFfnNorm ||
         w == Weight::kPostAttnNorm || w == Weight::kPostFfnNorm;
}

// The operations this engine runs, with the buffers it has for them.
bool Runs(const Op& op) {
  switch (op.kind) {
    case OpKind::kRmsNorm:
      return IsFloat(op.src) && (op.dst == Buf::kH || IsFloat(op.dst)) &&
             IsNormWeight(op.weight);
    case OpKind::kQkvRope:
      return op.src == Buf::kH;
    case OpKind::kAttention:
      return op.window >= 0;
    case OpKind::kDeltaNet:  // into a float buffer, as a matmul
      return op.src == Buf::kH && IsFloat(op.dst);
    case OpKind::kMatMul:
      return (op.src == Buf::kAtt || op.src == Buf::kH) && IsFloat(op.dst) &&
             op.weight == Weight::kAttnOutput;
    case OpKind::kFeedForward:
      if (op.src != Buf::kH || !IsFloat(op.dst)) return false;
      // RunMoe adds into x_, with the model's activation (as the CPU's).
      if (op.moe) return op.dst == Buf::kX && op.accumulate;
      return op.activation == FfnActivation::kSilu ||
             op.activation == FfnActivation::kGeluTanh ||
             op.activation == FfnActivation::kSwigluOai;
    case OpKind::kAdd:
      return IsFloat(op.src) && IsFloat(op.dst) && op.src != op.dst;
  }
  return false;
}

}  // namespace

absl::Status CudaEngine::CheckPrograms(
    const std::vector<LayerProgram>& programs) {
  for (size_t l = 0; l < programs.size(); ++l) {
    for (size_t i = 0; i < programs[l].ops.size(); ++i) {
      if (!Runs(programs[l].ops[i])) {
        return absl::UnimplementedError(absl::StrCat(
            "the CUDA engine does not run operation ", i, " of layer ", l,
            " (kind ", static_cast<int>(programs[l].ops[i].kind),
            ") of this architecture yet"));
      }
    }
  }
  return absl::OkStatus();
}

void* CudaEngine::Rows(Buf buf) const {
  switch (buf) {
    case Buf::kX:
      return x_.get();
    case Buf::kH:
      return h_.get();
    case Buf::kAtt:
      return att_.get();
    case Buf::kProj:
      return proj_.get();
  }
  return nullptr;
}

const DeviceBuffer& CudaEngine::NormWeight(Weight w, int64_t layer) const {
  const Layer& l = layers_[layer];
  switch (w) {
    case Weight::kFfnNorm:
      return l.ffn_norm;
    case Weight::kPostAttnNorm:
      return l.post_attn_norm;
    case Weight::kPostFfnNorm:
      return l.post_ffn_norm;
    default:
      return l.attn_norm;
  }
}

absl::Status CudaEngine::RunLayer(int64_t layer, int64_t n) {
  const std::vector<Op>& ops = programs_[layer].ops;
  const auto norm_at = [&ops](size_t j, Buf src, bool in_place) {
    return j < ops.size() && ops[j].kind == OpKind::kRmsNorm &&
           ops[j].src == src &&
           (in_place ? ops[j].dst == src : ops[j].dst == Buf::kH);
  };
  for (size_t i = 0; i < ops.size();) {
    // [RMSNorm(y -> y)] Add(y -> x) [RMSNorm(x -> h)]: one kernel.
    size_t j = i;
    const Op* post = nullptr;
    if (j + 1 < ops.size() && ops[j + 1].kind == OpKind::kAdd &&
        norm_at(j, ops[j + 1].src, /*in_place=*/true)) {
      post = &ops[j++];
    }
    if (ops[j].kind != OpKind::kAdd) {
      RETURN_IF_ERROR(RunOp(ops[i], layer, n));
      ++i;
      continue;
    }
    const Op& add = ops[j++];
    const Op* pre = nullptr;
    if (norm_at(j, add.dst, /*in_place=*/false)) pre = &ops[j++];
    RETURN_IF_ERROR(Residual(post, add, pre, layer, n));
    i = j;
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::Residual(const Op* post, const Op& add, const Op* pre,
                                  int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  CUDA_RETURN_IF_ERROR(LaunchAddRmsNorm(
      dtype_, FloatRows(add.src),
      post != nullptr ? NormWeight(post->weight, layer).as<float>() : nullptr,
      FloatRows(add.dst), n, c.n_embd,
      pre != nullptr ? NormWeight(pre->weight, layer).as<float>() : nullptr,
      static_cast<float>(c.rms_norm_eps), h_.get(), stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::RunOp(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  switch (op.kind) {
    case OpKind::kRmsNorm: {
      // Into h as T; into a float buffer (in place or not) as float.
      const GgmlType out = op.dst == Buf::kH ? dtype_ : GgmlType::kF32;
      CUDA_RETURN_IF_ERROR(LaunchRmsNorm(
          out, FloatRows(op.src), nullptr, nullptr, n, c.n_embd,
          NormWeight(op.weight, layer).as<float>(),
          static_cast<float>(c.rms_norm_eps), Rows(op.dst), stream()));
      return absl::OkStatus();
    }
    case OpKind::kQkvRope:
      return QkvRope(op, layer, n);
    case OpKind::kAttention:
      return Attention(op, layer, n);
    case OpKind::kDeltaNet:
      return DeltaNet(op, layer, n);
    case OpKind::kMatMul: {
      // Weight::kAttnOutput, the only matrix (Runs); its bias after the
      // GEMM, accumulated or not.
      const Layer& l = layers_[layer];
      float* dst = FloatRows(op.dst);
      RETURN_IF_ERROR(Gemm(l.attn_output, Rows(op.src), n, dst,
                           op.accumulate ? 1.0f : 0.0f));
      if (op.bias) {
        CUDA_RETURN_IF_ERROR(LaunchAddRowBias(l.o_bias.as<float>(), n, c.n_embd,
                                              dst, c.n_embd, stream()));
      }
      return absl::OkStatus();
    }
    case OpKind::kFeedForward:
      return FeedForward(op, layer, n);
    case OpKind::kAdd:
      return Residual(nullptr, op, nullptr, layer, n);
  }
  return absl::InternalError("unknown layer operation");
}

absl::Status CudaEngine::QkvRope(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const int64_t tk = options_.max_tokens_per_step;
  const int32_t* meta = meta_device_.as<int32_t>();
  if (op.output_gate) {
    // Wq's rows hold per head the query then the gate: split them.
    RETURN_IF_ERROR(Gemm(l.qkv, Rows(op.src), n, qg_.as<float>(), 0.0f));
    CUDA_RETURN_IF_ERROR(LaunchSplitQueryGate(
        qg_.as<float>(), n, c.n_heads, c.head_dim, c.n_kv_heads * c.head_dim,
        qkv_.as<float>(), attn_gate_.as<float>(), stream()));
  } else {
    RETURN_IF_ERROR(Gemm(l.qkv, Rows(op.src), n, qkv_.as<float>(), 0.0f));
  }
  QkvRopeParams rope;
  rope.n_tokens = n;
  rope.n_heads = c.n_heads;
  rope.n_kv_heads = c.n_kv_heads;
  rope.head_dim = c.head_dim;
  rope.rope_dim = c.rope_dim;
  rope.neox = c.rope_layout == RopeLayout::kNeoxHalves;
  rope.mscale = op.local_rope ? rope_mscale_swa_ : rope_mscale_;
  rope.eps = static_cast<float>(c.rms_norm_eps);
  rope.inv_freq =
      op.local_rope ? inv_freq_swa_.as<double>() : inv_freq_.as<double>();
  rope.bias = op.qkv_bias ? l.qkv_bias.as<float>() : nullptr;
  rope.q_norm = op.qk_norm ? l.q_norm.as<float>() : nullptr;
  rope.k_norm = op.qk_norm ? l.k_norm.as<float>() : nullptr;
  rope.positions = meta + kPositions * tk;
  rope.slot_mapping =
      meta + SlotsSection(kv_layout_.group_of_layer[layer]) * tk;
  rope.block_size = options_.block_size;
  rope.qkv = qkv_.as<float>();
  rope.kv_layer = KvLayer(layer);
  CUDA_RETURN_IF_ERROR(LaunchQkvRope(kv_dtype_, rope, stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::Attention(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const int64_t tk = options_.max_tokens_per_step;
  const int32_t* meta = meta_device_.as<int32_t>();
  const int64_t hd = c.head_dim;
  PagedAttentionParams att;
  att.n_tokens = n;
  att.n_heads = c.n_heads;
  att.n_kv_heads = c.n_kv_heads;
  att.head_dim = hd;
  att.block_size = options_.block_size;
  // As the CPU engine: the model's scale (gemma3's), else 1/sqrt(head_dim).
  att.scale = static_cast<float>(
      c.attention_scale != 0 ? c.attention_scale
                             : 1.0 / std::sqrt(static_cast<double>(hd)));
  att.window = op.window;
  att.sinks = op.sinks ? layers_[layer].attn_sinks.as<float>() : nullptr;
  att.q = qkv_.as<float>();
  att.q_stride = (c.n_heads + 2 * c.n_kv_heads) * hd;
  att.positions = meta + kPositions * tk;
  att.table_offsets =
      meta + OffsetsSection(kv_layout_.group_of_layer[layer]) * tk;
  att.block_tables = meta + TablesSection() * tk;
  att.kv_layer = KvLayer(layer);
  att.out = att_.get();
  att.max_context = max_context_;
  att.partial = partial_.as<float>();
  att.partial_rows = partial_rows_;
  att.tiles = use_tiles_ ? meta + kTiles * tk : nullptr;
  CUDA_RETURN_IF_ERROR(LaunchPagedAttention(dtype_, kv_dtype_, att, stream()));
  if (op.output_gate) {
    CUDA_RETURN_IF_ERROR(LaunchSigmoidGate(dtype_, att_.get(),
                                           attn_gate_.as<float>(),
                                           n * c.n_heads * hd, stream()));
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::FeedForward(const Op& op, int64_t layer, int64_t n) {
  if (op.moe) return RunMoe(layer, n);  // adds into x_
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  RETURN_IF_ERROR(Gemm(l.gate_up, Rows(op.src), n, gate_up_.as<float>(), 0.0f));
  RETURN_IF_ERROR(
      Activate(op.activation, gate_up_.as<float>(), n, c.n_ff, act_.get()));
  return Gemm(l.ffn_down, act_.get(), n, FloatRows(op.dst),
              op.accumulate ? 1.0f : 0.0f);
}

absl::Status CudaEngine::Activate(FfnActivation activation,
                                  const float* gate_up, int64_t n, int64_t ff,
                                  void* out) {
  switch (activation) {
    case FfnActivation::kSilu:
      CUDA_RETURN_IF_ERROR(LaunchSwiGlu(dtype_, gate_up, n, ff, out, stream()));
      return absl::OkStatus();
    case FfnActivation::kGeluTanh:
      CUDA_RETURN_IF_ERROR(
          LaunchGeluTanhGlu(dtype_, gate_up, n, ff, out, stream()));
      return absl::OkStatus();
    case FfnActivation::kSwigluOai:
      CUDA_RETURN_IF_ERROR(
          LaunchSwigluOai(dtype_, gate_up, n, ff, out, stream()));
      return absl::OkStatus();
  }
  return absl::InternalError("unknown feed-forward activation");
}

}  // namespace paceline::engine::cuda
