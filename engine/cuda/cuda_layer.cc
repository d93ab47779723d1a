// The CUDA engine's layer operations (model/layer_program.h): RunLayer runs
// a layer's program, each operation once here for every architecture. The
// buffers: x_ (float) is Buf::kX, h_ (T) Buf::kH, att_ (T) Buf::kAtt; a
// residual add is fused into its matmul (beta 1), so the engine keeps no
// Buf::kProj and runs no kAdd yet; nor sliding windows, the sliding
// layers' RoPE or GeGLU (gemma3): CheckPrograms says so at creation.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/paged_attention.h"
#include "engine/cuda/kernels/qkv_rope.h"
#include "engine/cuda/kernels/rms_norm.h"
#include "engine/cuda/kernels/swiglu.h"

namespace paceline::engine::cuda {
namespace {

// The operations this engine runs, with the buffers it has for them.
bool Runs(const Op& op) {
  switch (op.kind) {
    case OpKind::kRmsNorm:
      return op.src == Buf::kX && op.dst == Buf::kH;
    case OpKind::kQkvRope:
      return op.src == Buf::kH && !op.local_rope;
    case OpKind::kAttention:
      return op.window == 0;
    case OpKind::kMatMul:
      return op.src == Buf::kAtt && op.dst == Buf::kX && op.accumulate &&
             op.weight == Weight::kAttnOutput;
    case OpKind::kFeedForward:
      return op.src == Buf::kH && op.dst == Buf::kX && op.accumulate &&
             op.activation == FfnActivation::kSilu;
    case OpKind::kAdd:
      return false;
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

absl::Status CudaEngine::RunLayer(int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const float eps = static_cast<float>(c.rms_norm_eps);
  for (const Op& op : programs_[layer].ops) {
    switch (op.kind) {
      case OpKind::kRmsNorm: {
        const DeviceBuffer& w =
            op.weight == Weight::kFfnNorm ? l.ffn_norm : l.attn_norm;
        CUDA_RETURN_IF_ERROR(LaunchRmsNorm(dtype_, x_.as<float>(), nullptr,
                                           nullptr, n, c.n_embd, w.as<float>(),
                                           eps, h_.get(), stream()));
        break;
      }
      case OpKind::kQkvRope:
        RETURN_IF_ERROR(QkvRope(op, layer, n));
        break;
      case OpKind::kAttention:
        RETURN_IF_ERROR(Attention(layer, n));
        break;
      case OpKind::kMatMul:
        RETURN_IF_ERROR(
            Gemm(l.attn_output, att_.get(), n, x_.as<float>(), 1.0f));
        break;
      case OpKind::kFeedForward:
        RETURN_IF_ERROR(FeedForward(op, layer, n));
        break;
      case OpKind::kAdd:
        return absl::InternalError("kAdd passed CheckPrograms");
    }
  }
  return absl::OkStatus();
}

absl::Status CudaEngine::QkvRope(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const int64_t tk = options_.max_tokens_per_step;
  const int32_t* meta = meta_device_.as<int32_t>();
  RETURN_IF_ERROR(Gemm(l.qkv, h_.get(), n, qkv_.as<float>(), 0.0f));
  QkvRopeParams rope;
  rope.n_tokens = n;
  rope.n_heads = c.n_heads;
  rope.n_kv_heads = c.n_kv_heads;
  rope.head_dim = c.head_dim;
  rope.rope_dim = c.rope_dim;
  rope.neox = c.rope_layout == RopeLayout::kNeoxHalves;
  rope.mscale = rope_mscale_;
  rope.eps = static_cast<float>(c.rms_norm_eps);
  rope.inv_freq = inv_freq_.as<double>();
  rope.bias = op.qkv_bias ? l.qkv_bias.as<float>() : nullptr;
  rope.q_norm = op.qk_norm ? l.q_norm.as<float>() : nullptr;
  rope.k_norm = op.qk_norm ? l.k_norm.as<float>() : nullptr;
  rope.positions = meta + kPositions * tk;
  rope.slot_mapping = meta + kSlots * tk;
  rope.block_size = options_.block_size;
  rope.qkv = qkv_.as<float>();
  rope.kv_layer = KvLayer(layer);
  CUDA_RETURN_IF_ERROR(LaunchQkvRope(kv_dtype_, rope, stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::Attention(int64_t layer, int64_t n) {
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
  att.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  att.q = qkv_.as<float>();
  att.q_stride = (c.n_heads + 2 * c.n_kv_heads) * hd;
  att.positions = meta + kPositions * tk;
  att.table_offsets = meta + kTableOffsets * tk;
  att.block_tables = meta + kTables * tk;
  att.kv_layer = KvLayer(layer);
  att.out = att_.get();
  att.max_context = max_context_;
  att.partial = partial_.as<float>();
  att.partial_rows = partial_rows_;
  att.tiles = use_tiles_ ? meta + kTiles * tk : nullptr;
  CUDA_RETURN_IF_ERROR(LaunchPagedAttention(dtype_, kv_dtype_, att, stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::FeedForward(const Op& op, int64_t layer, int64_t n) {
  if (op.moe) return RunMoe(layer, n);  // adds into x_
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  RETURN_IF_ERROR(Gemm(l.gate_up, h_.get(), n, gate_up_.as<float>(), 0.0f));
  CUDA_RETURN_IF_ERROR(LaunchSwiGlu(dtype_, gate_up_.as<float>(), n, c.n_ff,
                                    act_.get(), stream()));
  return Gemm(l.ffn_down, act_.get(), n, x_.as<float>(), 1.0f);
}

}  // namespace paceline::engine::cuda
