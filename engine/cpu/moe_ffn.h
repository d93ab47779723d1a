#ifndef PACELINE_ENGINE_CPU_MOE_FFN_H_
#define PACELINE_ENGINE_CPU_MOE_FFN_H_

// The mixture-of-experts feed-forward of a qwen3moe or gpt-oss layer on
// the CPU.
//
// Per step, with n tokens and k = n_expert_used:
//   r = h Wrouter (+ b_router)           (n, n_expert)   one MatMul
//   per token: softmax(r) -> top k -> weights renormalised to sum 1
//   group the step's (token, rank) pairs by expert
//   per selected expert e, its m_e tokens gathered into one block:
//     y_e = act(x_e Wgate_e + bg_e, x_e Wup_e + bu_e) Wdown_e + bd_e
//   (one MatMul each; act the config's gated activation, biases with
//   gpt-oss only)
//   out[t] = sum over rank j of w[t, j] * y[t's row for rank j]
// So a step reads the router once and each expert that any of its tokens
// selected once (the union of the selections), however many tokens chose
// it: a batch of B tokens reads min(n_expert, B * k) experts, not B * k.
//
// Batch invariance: each token's expert rows come out of MatMuls whose
// results do not depend on the other rows (matmul.h), and its k outputs
// are summed in the token's own rank order, so a token's result is bit for
// bit the same alone or in any batch.
//
// Thread-safety: one MoeFfn per engine, used by the engine thread only.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"

namespace paceline::engine::cpu {

// Routes each token: softmax over the router logits, the k most probable
// experts (a tie goes to the lower expert index), in descending order,
// with weights renormalised over those k (computed in double:
// exp(l_j - l_max) / sum over the k of exp(l_i - l_max), which is the
// softmax probability divided by the top-k sum).
//   logits:  (n_tokens, n_expert)
//   experts: (n_tokens, k) expert ids, rank order
//   weights: (n_tokens, k) summing to 1 per token
void RouteTokens(const float* logits, int64_t n_tokens, int64_t n_expert,
                 int64_t k, int32_t* experts, float* weights);

// The matrices of one MoE layer as the engine reads them (packed or not).
struct MoeLayerMatrices {
  WeightView router;                   // (n_expert, n_embd)
  std::vector<ExpertWeights> experts;  // (n_expert)
};

// A MoE layer's biases (LayerWeights' router_bias, *_exps_bias), each null
// when the layer has none: the router's (n_expert); the experts' stacked,
// expert e's at e * n_ff_exp (gate, up) and e * n_embd (down).
struct MoeBiases {
  const float* router = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

class MoeFfn {
 public:
  // Scratch sized for `max_tokens` tokens of `config` (a MoE config).
  MoeFfn(const ModelConfig& config, int64_t max_tokens);

  // out = the MoE FFN of h (overwritten, not accumulated). n <= max_tokens.
  //   h:   (n, n_embd) the normed FFN input
  //   out: (n, n_embd)
  // Errors are MatMul's.
  absl::Status Run(const MoeLayerMatrices& m, const MoeBiases& biases,
                   const float* h, int64_t n, float* out, ThreadPool& pool,
                   MatMulScratch& scratch);

  // Matrix bytes the last Run read: the router and each selected expert.
  uint64_t last_run_bytes() const { return last_run_bytes_; }
  // Experts the last Run selected (at least one token).
  int64_t last_run_experts() const { return last_run_experts_; }

 private:
  // Fills counts_, offsets_, row_token_ and row_of_ from experts_.
  void GroupByExpert(int64_t n);
  absl::Status RunExpert(const ExpertWeights& e, const MoeBiases& biases,
                         int64_t expert, int64_t begin, int64_t rows,
                         ThreadPool& pool, MatMulScratch& scratch);

  // Constant after construction.
  const int64_t n_embd_;
  const int64_t n_expert_;
  const int64_t k_;
  const int64_t n_ff_exp_;
  const FfnActivation activation_;

  // Scratch, T = max_tokens; a "row" is one (token, rank) pair, rows of
  // one expert contiguous, tokens ascending within an expert.
  std::vector<float> logits_;       // (T, n_expert)
  std::vector<int32_t> experts_;    // (T, k)
  std::vector<float> weights_;      // (T, k)
  std::vector<int64_t> counts_;     // (n_expert) rows per expert
  std::vector<int64_t> offsets_;    // (n_expert + 1) first row per expert
  std::vector<int32_t> row_token_;  // (T * k) the token of each row
  std::vector<int64_t> row_of_;     // (T, k) the row of (token, rank)
  std::vector<float> x_;            // (T * k, n_embd) gathered inputs
  std::vector<float> gate_;         // (T * k, n_ff_exp)
  std::vector<float> up_;           // (T * k, n_ff_exp)
  std::vector<float> y_;            // (T * k, n_embd) expert outputs
  uint64_t last_run_bytes_ = 0;
  int64_t last_run_experts_ = 0;
};

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_MOE_FFN_H_
