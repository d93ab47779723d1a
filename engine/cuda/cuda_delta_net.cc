// The CUDA engine's hybrid-model operations (cuda_engine.h): a Gated
// DeltaNet layer over each slice's state slot (kernels/delta_net.h), the
// MoE's gated shared expert, and the state slots, as the CPU engine's
// cpu_delta_net.cc.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/delta_net.h"
#include "engine/cuda/kernels/gates.h"
#include "engine/cuda/kernels/swiglu.h"

namespace paceline::engine::cuda {

absl::Status CudaEngine::UploadDeltaNet(const LayerWeights& lw, Layer* l) {
  // One GEMM for every input projection: q/k/v, z, then beta and alpha
  // (two matrices, or qwen3next's one laid out per key head).
  if (config().ssm_fused_ba) {
    RETURN_IF_ERROR(
        UploadGroup({&lw.ssm_qkv, &lw.ssm_z, &lw.ssm_ba}, &l->ssm_in));
  } else {
    RETURN_IF_ERROR(UploadGroup(
        {&lw.ssm_qkv, &lw.ssm_z, &lw.ssm_beta, &lw.ssm_alpha}, &l->ssm_in));
  }
  RETURN_IF_ERROR(UploadGroup({&lw.ssm_out}, &l->ssm_out));
  RETURN_IF_ERROR(UploadFloats(lw.ssm_conv1d, &l->ssm_conv1d));
  RETURN_IF_ERROR(UploadFloats(lw.ssm_a, &l->ssm_a));
  RETURN_IF_ERROR(UploadFloats(lw.ssm_dt_bias, &l->ssm_dt_bias));
  return UploadFloats(lw.ssm_norm, &l->ssm_norm);
}

absl::Status CudaEngine::AllocateHybridWorkspace() {
  const ModelConfig& c = config();
  const size_t t = static_cast<size_t>(options_.max_tokens_per_step);
  const size_t q_dim = static_cast<size_t>(c.n_heads * c.head_dim);
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads * c.head_dim);
  if (c.attn_output_gate) {
    RETURN_IF_ERROR(qg_.Allocate(t * (2 * q_dim + 2 * kv_dim) * sizeof(float)));
    RETURN_IF_ERROR(attn_gate_.Allocate(t * q_dim * sizeof(float)));
  }
  if (c.n_ff_shexp > 0) {
    RETURN_IF_ERROR(shexp_y_.Allocate(t * c.n_embd * sizeof(float)));
  }
  if (num_state_slots_ == 0) return absl::OkStatus();
  const size_t conv = static_cast<size_t>(c.ssm_conv_dim());
  const size_t inner = static_cast<size_t>(c.ssm_value_dim());
  const size_t nv = static_cast<size_t>(c.ssm_v_heads);
  RETURN_IF_ERROR(
      ssm_in_.Allocate(t * (conv + inner + 2 * nv) * sizeof(float)));
  RETURN_IF_ERROR(ssm_conv_.Allocate(t * conv * sizeof(float)));
  RETURN_IF_ERROR(ssm_o_.Allocate(t * inner * GgmlBlockBytes(dtype_)));
  // Zeroed once so that a slot copied before its first use copies zeros
  // (a slice at position 0 reads its state as zeros anyway).
  RETURN_IF_ERROR(
      states_.Allocate(static_cast<size_t>(num_state_slots_) *
                       static_cast<size_t>(c.RecurrentStateBytes())));
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(states_.get(), 0, states_.bytes(), stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::DeltaNet(const Op& op, int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const int64_t tk = options_.max_tokens_per_step;
  const int64_t nv = c.ssm_v_heads;
  const int64_t conv = c.ssm_conv_dim();
  const int64_t inner = c.ssm_value_dim();
  const int32_t* slices = meta_device_.as<int32_t>() + SlicesSection() * tk;
  // This layer's part of slot 0; a slot holds every DeltaNet layer's.
  float* states =
      states_.as<float>() + recurrent_index_[layer] * c.RecurrentStateFloats();
  const int64_t slot_stride = c.NumRecurrentLayers() * c.RecurrentStateFloats();
  // (n, conv + inner + 2 nv): q/k/v | z | beta, alpha
  RETURN_IF_ERROR(Gemm(l.ssm_in, Rows(op.src), n, ssm_in_.as<float>(), 0.0f));

  DeltaNetConvParams cp;
  cp.n_slices = num_slices_;
  cp.slices = slices;
  cp.conv_dim = conv;
  cp.kernel = c.ssm_conv_kernel;
  cp.w = l.ssm_conv1d.as<float>();
  cp.x = ssm_in_.as<float>();
  cp.x_stride = l.ssm_in.rows;
  cp.out = ssm_conv_.as<float>();
  cp.states = states;
  cp.slot_stride = slot_stride;
  CUDA_RETURN_IF_ERROR(LaunchDeltaNetConv(cp, stream()));

  DeltaNetRuleParams rp;
  rp.n_slices = num_slices_;
  rp.slices = slices;
  rp.k_heads = c.ssm_k_heads;
  rp.v_heads = nv;
  rp.head_dim = c.ssm_state_size;
  rp.grouped = c.ssm_grouped_heads;
  rp.fused_ba = c.ssm_fused_ba;
  rp.eps = static_cast<float>(c.rms_norm_eps);
  rp.conv = ssm_conv_.as<float>();
  rp.in = ssm_in_.as<float>();
  rp.in_stride = l.ssm_in.rows;
  rp.z_col = conv;
  rp.ba_col = conv + inner;
  rp.ssm_a = l.ssm_a.as<float>();
  rp.dt_bias = l.ssm_dt_bias.as<float>();
  rp.norm = l.ssm_norm.as<float>();
  rp.states = states + (c.ssm_conv_kernel - 1) * conv;
  rp.slot_stride = slot_stride;
  rp.out = ssm_o_.get();
  CUDA_RETURN_IF_ERROR(LaunchDeltaNetRule(dtype_, rp, stream()));
  return Gemm(l.ssm_out, ssm_o_.get(), n, FloatRows(op.dst),
              op.accumulate ? 1.0f : 0.0f);
}

absl::Status CudaEngine::SharedExpert(int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const int64_t ff = c.n_ff_shexp;
  RETURN_IF_ERROR(
      Gemm(l.shexp_gate_up, h_.get(), n, gate_up_.as<float>(), 0.0f));
  CUDA_RETURN_IF_ERROR(
      LaunchSwiGlu(dtype_, gate_up_.as<float>(), n, ff, act_.get(), stream()));
  RETURN_IF_ERROR(
      Gemm(l.shexp_down, act_.get(), n, shexp_y_.as<float>(), 0.0f));
  CUDA_RETURN_IF_ERROR(LaunchSigmoidGatedAdd(
      dtype_, h_.get(), l.shexp_gate.as<float>(), shexp_y_.as<float>(), n,
      c.n_embd, x_.as<float>(), stream()));
  return absl::OkStatus();
}

absl::Status CudaEngine::CopyStates(
    absl::Span<const kvpager::StateCopy> copies) {
  for (const kvpager::StateCopy& copy : copies) {
    if (copy.src < 0 || copy.src >= num_state_slots_ || copy.dst < 0 ||
        copy.dst >= num_state_slots_) {
      return absl::InvalidArgumentError(
          absl::StrCat("state copy ", copy.src, " -> ", copy.dst, ": ",
                       num_state_slots_, " state slots"));
    }
  }
  if (copies.empty()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  const size_t slot_bytes = static_cast<size_t>(config().RecurrentStateBytes());
  for (const kvpager::StateCopy& copy : copies) {
    if (copy.src == copy.dst) continue;
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(states_.as<uint8_t>() + copy.dst * slot_bytes,
                        states_.as<uint8_t>() + copy.src * slot_bytes,
                        slot_bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  return absl::OkStatus();
}

}  // namespace paceline::engine::cuda
