#ifndef PACELINE_ENGINE_MODEL_WEIGHTS_H_
#define PACELINE_ENGINE_MODEL_WEIGHTS_H_

// A Llama-family model's weights in memory, as the CPU engine reads them.
//
// Matrices are WeightView values in their storage type: row r is
// output feature r with its input features contiguous (a GGUF tensor of
// ggml shape [cols, rows]). From a file they point into the file's mapping
// (zero-copy) whenever the matmul has a kernel for the type; a type without
// one is converted once at load (quantized types to Q8_0, others to F32)
// and one line per conversion kind goes to stderr. Norm weights and biases
// are small and always held as float.
//
// Thread-safety: immutable after construction; share it freely (engines
// hold it through std::shared_ptr<const ModelWeights>).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"
#include "engine/model/weight_view.h"

namespace paceline::engine {

// One expert's SwiGLU FFN in a MoE layer: views into expert e's slice of
// the layer's 3-D tensors (ffn_{gate,up,down}_exps; a slice is whole rows).
struct ExpertWeights {
  WeightView gate;  // (n_ff_exp, n_embd)
  WeightView up;    // (n_ff_exp, n_embd)
  WeightView down;  // (n_embd, n_ff_exp)
};

// q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim. A MoE layer
// (config.is_moe()) has ffn_gate_inp and experts, and empty ffn_gate / up /
// down views (rows 0); a dense layer the other way round.
struct LayerWeights {
  std::vector<float> attn_norm;  // (n_embd)
  WeightView attn_q;             // (q_dim, n_embd)
  WeightView attn_k;             // (kv_dim, n_embd)
  WeightView attn_v;             // (kv_dim, n_embd)
  std::vector<float> q_bias;     // (q_dim) when config.qkv_bias, else empty
  std::vector<float> k_bias;     // (kv_dim) when config.qkv_bias, else empty
  std::vector<float> v_bias;     // (kv_dim) when config.qkv_bias, else empty
  std::vector<float> q_norm;     // (head_dim) when config.qk_norm, else empty
  std::vector<float> k_norm;     // (head_dim) when config.qk_norm, else empty
  WeightView attn_output;        // (n_embd, q_dim)
  // (n_embd) when config.attn_output_bias, else empty.
  std::vector<float> o_bias;
  // (n_heads) when config.attn_sinks, else empty.
  std::vector<float> attn_sinks;
  // (n_embd); blk.N.post_attention_norm when
  // config.ffn_norm_is_post_attention_norm (gpt-oss).
  std::vector<float> ffn_norm;
  // (n_embd) each when config.post_norms (gemma3), else empty.
  std::vector<float> post_attn_norm;
  std::vector<float> post_ffn_norm;
  WeightView ffn_gate;           // (n_ff, n_embd)
  WeightView ffn_up;             // (n_ff, n_embd)
  WeightView ffn_down;           // (n_embd, n_ff)
  WeightView ffn_gate_inp;       // (n_expert, n_embd) the MoE router
  std::vector<ExpertWeights> experts;  // (n_expert)
  // When config.moe_biases, else empty: the router's (n_expert) and the
  // experts' stacked biases, expert e's at e * n_ff_exp (gate, up) and
  // e * n_embd (down).
  std::vector<float> router_bias;
  std::vector<float> gate_exps_bias;  // (n_expert * n_ff_exp)
  std::vector<float> up_exps_bias;    // (n_expert * n_ff_exp)
  std::vector<float> down_exps_bias;  // (n_expert * n_embd)
  // The shared expert (config.n_ff_shexp > 0), else empty: a SwiGLU FFN
  // and its gate's weights (one logit per token).
  WeightView ffn_gate_shexp;              // (n_ff_shexp, n_embd)
  WeightView ffn_up_shexp;                // (n_ff_shexp, n_embd)
  WeightView ffn_down_shexp;              // (n_embd, n_ff_shexp)
  std::vector<float> ffn_gate_inp_shexp;  // (n_embd)

  // A Gated DeltaNet layer (config.IsRecurrentLayer), else empty, with
  // conv = ssm_conv_dim(), inner = ssm_value_dim(), nv = ssm_v_heads. Its
  // attn_q/k/v, attn_output and Q/K norms are then empty.
  WeightView ssm_qkv;    // (conv, n_embd) blk.N.attn_qkv: q, k, v rows
  WeightView ssm_z;      // (inner, n_embd) blk.N.attn_gate: the output gate
  WeightView ssm_beta;   // (nv, n_embd); empty when config.ssm_fused_ba
  WeightView ssm_alpha;  // (nv, n_embd); empty when config.ssm_fused_ba
  WeightView ssm_ba;     // (2 nv, n_embd) when config.ssm_fused_ba
  // (conv * conv_kernel): channel c's taps at c * conv_kernel, oldest
  // input first.
  std::vector<float> ssm_conv1d;
  std::vector<float> ssm_a;        // (nv) -exp(A_log)
  std::vector<float> ssm_dt_bias;  // (nv)
  std::vector<float> ssm_norm;     // (ssm_state_size)
  WeightView ssm_out;              // (n_embd, inner)
};

class ModelWeights {
 public:
  // Takes ownership of `file` (the views point into its mapping). Reads the
  // config (ModelConfigFromGguf), checks every tensor's shape
  // (CheckModelTensors) and that the file holds nothing the engine would
  // ignore in silence (CheckModelInventory: one stderr warning line each
  // for ignored tensors and unknown keys), and builds the views. Errors:
  // those of the three calls above; InvalidArgument for a rope the config
  // cannot build (CheckRopeConfig) or non-positive rope_freqs factors;
  // Unimplemented for a head size over kMaxHeadDim, or a tensor type that
  // cannot be dequantized.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> FromGguf(
      std::unique_ptr<GgufFile> file);

  // Random weights of `config`'s shape, for benchmarks and tests: matrices,
  // embedding and biases ~ normal(0, 0.02); norm weights 1 + normal(0, 0.02)
  // (pure noise would shrink every activation). Each matrix (the embedding
  // included) is stored in the type `recipe` gives it (weight_recipe.h):
  // F32, F16, BF16, Q8_0, Q4_0, Q2_K..Q6_K, or a mix such as q4_k_m, kept
  // as they are whether or not the matmul has a kernel for them. Q8_0 and
  // Q4_0 need widths that are multiples of 32, the K-quants and the mixes
  // multiples of 256: InvalidArgument otherwise, or for a type QuantizeRow
  // cannot write. Deterministic in (config, recipe, seed): each row has its
  // own generator, so the thread count does not matter.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Dummy(
      const ModelConfig& config, const WeightRecipe& recipe, uint64_t seed);
  // Every matrix as `type`: Dummy(config, WeightRecipe::Uniform(type), seed).
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Dummy(
      const ModelConfig& config, GgmlType type, uint64_t seed);

  ~ModelWeights();
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  // Attention scratch is sized for heads up to this many dims.
  static constexpr int64_t kMaxHeadDim = 512;

  const ModelConfig& config() const { return config_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // (n_vocab, n_embd) in any type DequantizeRow supports (one row is read
  // per token).
  const WeightView& token_embd() const { return token_embd_; }
  // (n_embd)
  const std::vector<float>& output_norm() const { return output_norm_; }
  // Llama 3 RoPE frequency factors (rope_freqs.weight, any model that has
  // it): pair i turns by theta_i / factor[i]. (rope_dim / 2), or empty.
  const std::vector<float>& rope_freq_factors() const {
    return rope_freq_factors_;
  }
  // (n_vocab, n_embd); token_embd itself when tied and its type has a
  // matmul kernel.
  const WeightView& output() const { return output_; }

  // Writes token `id`'s embedding row. id must be in [0, n_vocab).
  //   out: (n_embd)
  absl::Status Embed(int32_t id, float* out) const;

  // Bytes of matrices one decode step of one token reads (all layers and
  // the output head; the embedding row is negligible): the numerator of the
  // bandwidth roofline. MoE layers count the router and n_expert_used
  // experts, the ones a token runs.
  uint64_t MatMulBytesPerToken() const;
  // Bytes of every matrix held (every expert of a MoE layer): what stays
  // resident.
  uint64_t MatMulBytes() const;
  // Bytes of one expert's three matrices in `layer` (0 for a dense layer).
  uint64_t ExpertBytes(int64_t layer) const;

 private:
  ModelWeights() = default;

  // Owns an aligned buffer for converted or generated weights; returns it.
  uint8_t* Allocate(size_t bytes);

  // Constant after construction.
  ModelConfig config_;
  std::unique_ptr<GgufFile> file_;  // keeps the mapping alive (files only)
  struct Buffer;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // converted / dummy data
  WeightView token_embd_;                         // (n_vocab, n_embd)
  std::vector<float> output_norm_;                // (n_embd)
  std::vector<float> rope_freq_factors_;          // (rope_dim / 2) or empty
  WeightView output_;                             // (n_vocab, n_embd)
  std::vector<LayerWeights> layers_;              // (n_layers)

  friend class WeightsBuilder;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_WEIGHTS_H_
