// The CUDA engine's mixture-of-experts FFN (qwen3moe, gpt-oss with the
// router's and experts' biases, the hybrids with a shared expert:
// cuda_delta_net.cc; cuda_engine.h).
//
// Routing runs on the device (LaunchMoeRoute), then only the expert ids
// (n_tokens x k int32) come back to the host, which groups the step's
// (token, rank) rows by expert. That grouping is what lets each selected
// expert run as one GEMM over all its tokens, reading its weights once per
// step: a step reads the router and the union of the experts its tokens
// selected. The price is one small copy and a stream sync per MoE layer
// (and so no CUDA graphs for MoE models); grouping on the device (a
// device-side sort and grouped GEMMs with device-side sizes) is the next
// step if the sync shows in decode latency.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels/moe.h"
#include "engine/cuda/kernels/scale.h"

namespace paceline::engine::cuda {

absl::Status CudaEngine::UploadMoe(const LayerWeights& lw, Layer* l) {
  RETURN_IF_ERROR(UploadGroup({&lw.ffn_gate_inp}, &l->router));
  l->expert_gate_up.resize(lw.experts.size());
  l->expert_down.resize(lw.experts.size());
  for (size_t e = 0; e < lw.experts.size(); ++e) {
    const ExpertWeights& x = lw.experts[e];
    RETURN_IF_ERROR(UploadGroup({&x.gate, &x.up}, &l->expert_gate_up[e]));
    RETURN_IF_ERROR(UploadGroup({&x.down}, &l->expert_down[e]));
  }
  if (config().n_ff_shexp > 0) {
    RETURN_IF_ERROR(
        UploadGroup({&lw.ffn_gate_shexp, &lw.ffn_up_shexp}, &l->shexp_gate_up));
    RETURN_IF_ERROR(UploadGroup({&lw.ffn_down_shexp}, &l->shexp_down));
    RETURN_IF_ERROR(UploadFloats(lw.ffn_gate_inp_shexp, &l->shexp_gate));
  }
  if (!config().moe_biases) return absl::OkStatus();
  const int64_t ff = config().n_ff_exp;
  std::vector<float> gate_up;  // expert e's gate bias, then its up bias
  gate_up.reserve(lw.gate_exps_bias.size() + lw.up_exps_bias.size());
  for (size_t e = 0; e < lw.experts.size(); ++e) {
    for (const std::vector<float>* b : {&lw.gate_exps_bias, &lw.up_exps_bias}) {
      gate_up.insert(gate_up.end(), b->begin() + e * ff,
                     b->begin() + (e + 1) * ff);
    }
  }
  RETURN_IF_ERROR(UploadFloats(lw.router_bias, &l->router_bias));
  RETURN_IF_ERROR(UploadFloats(gate_up, &l->expert_gate_up_bias));
  return UploadFloats(lw.down_exps_bias, &l->expert_down_bias);
}

absl::Status CudaEngine::AllocateMoeWorkspace() {
  const ModelConfig& c = config();
  const size_t t = static_cast<size_t>(options_.max_tokens_per_step);
  const size_t k = static_cast<size_t>(c.n_expert_used);
  const size_t rows = t * k;
  const size_t elem = GgmlBlockBytes(dtype_);
  const size_t embd = static_cast<size_t>(c.n_embd);
  const size_t ff = static_cast<size_t>(c.n_ff_exp);
  RETURN_IF_ERROR(router_logits_.Allocate(t * c.n_expert * sizeof(float)));
  RETURN_IF_ERROR(
      moe_route_.Allocate(rows * (sizeof(int32_t) + sizeof(float))));
  RETURN_IF_ERROR(moe_route_host_.Allocate(rows * sizeof(int32_t)));
  RETURN_IF_ERROR(moe_rows_host_.Allocate(2 * rows * sizeof(int32_t)));
  RETURN_IF_ERROR(moe_rows_.Allocate(2 * rows * sizeof(int32_t)));
  RETURN_IF_ERROR(moe_x_.Allocate(rows * embd * elem));
  RETURN_IF_ERROR(moe_gate_up_.Allocate(rows * 2 * ff * sizeof(float)));
  RETURN_IF_ERROR(moe_act_.Allocate(rows * ff * elem));
  RETURN_IF_ERROR(moe_y_.Allocate(rows * embd * sizeof(float)));
  moe_offsets_.resize(static_cast<size_t>(c.n_expert) + 1);
  moe_fill_.reserve(static_cast<size_t>(c.n_expert));
  return absl::OkStatus();
}

// Rows of one expert are contiguous, its tokens ascending: the same order
// as cpu::MoeFfn.
void CudaEngine::GroupByExpert(int64_t n) {
  const int64_t k = config().n_expert_used;
  const int64_t n_expert = config().n_expert;
  const int32_t* experts = moe_route_host_.as<int32_t>();
  int32_t* row_token = moe_rows_host_.as<int32_t>();
  int32_t* row_of = row_token + n * k;
  std::fill(moe_offsets_.begin(), moe_offsets_.end(), 0);
  for (int64_t i = 0; i < n * k; ++i) ++moe_offsets_[experts[i] + 1];
  for (int64_t e = 0; e < n_expert; ++e) {
    moe_offsets_[e + 1] += moe_offsets_[e];
  }
  // moe_fill_[e]: expert e's next free row.
  moe_fill_.assign(moe_offsets_.begin(), moe_offsets_.end() - 1);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = moe_fill_[experts[t * k + j]]++;
      row_token[row] = static_cast<int32_t>(t);
      row_of[t * k + j] = static_cast<int32_t>(row);
    }
  }
}

absl::Status CudaEngine::RunMoe(int64_t layer, int64_t n) {
  const ModelConfig& c = config();
  const Layer& l = layers_[layer];
  const int64_t k = c.n_expert_used;
  const int64_t rows = n * k;
  const int64_t tk = options_.max_tokens_per_step;
  const int64_t embd = c.n_embd;
  const int64_t ff = c.n_ff_exp;
  const size_t elem = GgmlBlockBytes(dtype_);
  cudaStream_t stream = this->stream();
  int32_t* experts = moe_route_.as<int32_t>();
  float* weights = reinterpret_cast<float*>(experts + tk * k);

  const bool biased = c.moe_biases;
  RETURN_IF_ERROR(
      Gemm(l.router, h_.get(), n, router_logits_.as<float>(), 0.0f));
  if (biased) {
    CUDA_RETURN_IF_ERROR(
        LaunchAddRowBias(l.router_bias.as<float>(), n, c.n_expert,
                         router_logits_.as<float>(), c.n_expert, stream));
  }
  CUDA_RETURN_IF_ERROR(LaunchMoeRoute(router_logits_.as<float>(), n, c.n_expert,
                                      k, experts, weights, stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(moe_route_host_.get(), experts,
                                       rows * sizeof(int32_t),
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t e = moe_route_host_.as<int32_t>()[i];
    if (e < 0 || e >= c.n_expert) {
      return absl::InternalError(
          absl::StrCat("moe routing gave expert ", e, " in layer ", layer));
    }
  }
  GroupByExpert(n);
  int32_t* row_token = moe_rows_.as<int32_t>();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(row_token, moe_rows_host_.get(),
                                       2 * rows * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(LaunchMoeGather(dtype_, h_.get(), row_token, rows, embd,
                                       moe_x_.get(), stream));
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const int64_t b = moe_offsets_[e];
    const int64_t m = moe_offsets_[e + 1] - b;
    if (m == 0) continue;
    float* gate_up = moe_gate_up_.as<float>() + b * 2 * ff;
    uint8_t* act = moe_act_.as<uint8_t>() + b * ff * elem;
    RETURN_IF_ERROR(Gemm(l.expert_gate_up[e],
                         moe_x_.as<uint8_t>() + b * embd * elem, m, gate_up,
                         0.0f));
    if (biased) {
      CUDA_RETURN_IF_ERROR(
          LaunchAddRowBias(l.expert_gate_up_bias.as<float>() + e * 2 * ff, m,
                           2 * ff, gate_up, 2 * ff, stream));
    }
    // As cpu::MoeFfn: the model's activation (the op's is the dense FFN's).
    RETURN_IF_ERROR(Activate(c.ffn_activation, gate_up, m, ff, act));
    float* y = moe_y_.as<float>() + b * embd;
    RETURN_IF_ERROR(Gemm(l.expert_down[e], act, m, y, 0.0f));
    if (biased) {
      CUDA_RETURN_IF_ERROR(LaunchAddRowBias(
          l.expert_down_bias.as<float>() + e * embd, m, embd, y, embd, stream));
    }
  }
  CUDA_RETURN_IF_ERROR(LaunchMoeCombine(moe_y_.as<float>(), row_token + rows,
                                        weights, n, k, embd, x_.as<float>(),
                                        stream));
  if (c.n_ff_shexp > 0) return SharedExpert(layer, n);
  return absl::OkStatus();
}

}  // namespace paceline::engine::cuda
