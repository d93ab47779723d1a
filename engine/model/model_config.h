#ifndef PACELINE_ENGINE_MODEL_MODEL_CONFIG_H_
#define PACELINE_ENGINE_MODEL_MODEL_CONFIG_H_

// Hyper-parameters of a Llama-family model (architectures `llama` — which
// also covers Mistral files —, `qwen2`, `qwen3`, and `qwen3moe`: qwen3 with
// a mixture-of-experts feed-forward), read from GGUF metadata or taken from
// a named shape (model_shapes.h).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_file.h"

namespace paceline::engine {

enum class RopeLayout {
  kAdjacentPairs,  // rotate (x[2i], x[2i+1]): llama ("normal")
  kNeoxHalves,     // rotate (x[i], x[i + d/2]): qwen2, qwen3 ("neox")
};

enum class RopeScaling { kNone, kLinear, kYarn };

// The feed-forward's gate activation: SiLU (SwiGLU: llama, qwen), GELU
// with the tanh approximation (GeGLU: gemma3), or gpt-oss's clamped
// SwiGLU (ops.h's SwigluOai).
enum class FfnActivation : int8_t { kSilu, kGeluTanh, kSwigluOai };

// How an embedding model turns a prompt's final hidden states (after the
// output norm) into one vector: GGUF `<arch>.pooling_type`, llama.cpp's
// enum values. kNone: a generation model (no key, or 0).
enum class PoolingType : int8_t {
  kNone = 0,
  kMean = 1,  // the average over the prompt's tokens
  kCls = 2,   // the first token's
  kLast = 3,  // the last token's (Qwen3-Embedding)
};
absl::string_view PoolingTypeName(PoolingType pooling);

struct ModelConfig {
  // "llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss"
  std::string architecture;
  std::string name;          // general.name, or the shape name

  int64_t n_layers = 0;
  int64_t n_embd = 0;  // model (residual) width
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // == n_heads without GQA
  int64_t head_dim = 0;    // attention.key_length when present
  int64_t n_ff = 0;        // FFN hidden width
  int64_t n_vocab = 0;
  int64_t context_length = 0;

  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;
  int64_t rope_dim = 0;  // rotated dims per head (<= head_dim)
  double rope_freq_base = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 1.0;
  int64_t rope_original_context = 0;  // yarn: original training context
  // rope.scaling.attn_factor: multiplies every rotated Q/K (any scaling).
  double rope_attn_factor = 1.0;
  // YaRN (rope_table.h has the formulas). ext_factor weighs extrapolation
  // in the ramp; attn_factor 0 means "derive it": 0.1 ln(factor) + 1.
  double yarn_ext_factor = 1.0;
  double yarn_attn_factor = 0.0;
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;

  double rms_norm_eps = 1e-5;
  bool tied_output = false;  // no output.weight: reuse token_embd
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3: per-head RMSNorm on Q and K
  // gemma3: the input embedding times this (sqrt(n_embd)); RMSNorms after
  // attention and after the feed-forward (blk.N.post_attention_norm,
  // blk.N.post_ffw_norm) before each joins the residual; the FFN's
  // activation; the attention's scale (0: 1/sqrt(head_dim)).
  double embed_scale = 1.0;
  bool post_norms = false;
  FfnActivation ffn_activation = FfnActivation::kSilu;
  double attention_scale = 0.0;
  // Sliding-window attention: a sliding layer attends to its last
  // `sliding_window` positions (0: every layer attends to all). Layer l
  // slides when l % swa_period < swa_period - 1 (llama.cpp's pattern; a
  // period of 0: every layer).
  int64_t sliding_window = 0;
  int64_t swa_period = 0;
  // Whether sliding layers rope apart from global ones (gemma3; gpt-oss's
  // rope alike), with rope_freq_base_swa, unscaled.
  bool sliding_rope = false;
  double rope_freq_base_swa = 10000.0;
  bool IsSlidingLayer(int64_t layer) const {
    return sliding_window > 0 &&
           (swa_period == 0 || layer % swa_period < swa_period - 1);
  }
  // gpt-oss: a bias on the attention output (blk.N.attn_output.bias); one
  // learned logit per head that joins each attention softmax's denominator
  // (blk.N.attn_sinks.weight); biases on the MoE router and on each
  // expert's gate, up and down rows (blk.N.ffn_{gate_inp,gate_exps,
  // up_exps,down_exps}.bias); the FFN's input norm stored as
  // blk.N.post_attention_norm (there is no ffn_norm; the engine loads it
  // as LayerWeights::ffn_norm).
  bool attn_output_bias = false;
  bool attn_sinks = false;
  bool moe_biases = false;
  bool ffn_norm_is_post_attention_norm = false;
  // `<arch>.pooling_type`: set for an embedding model (kNone otherwise).
  // Rank pooling (4, rerankers) is refused at load.
  PoolingType pooling = PoolingType::kNone;

  // Mixture of experts (qwen3moe, gpt-oss), 0 for a dense FFN. Each
  // layer's FFN is a router (n_expert, n_embd) whose softmax picks the top
  // n_expert_used experts per token, their weights renormalised to sum 1
  // (the same as gpt-oss's top-k of the logits, then a softmax over those
  // k); each expert is a gated FFN (ffn_activation) of width n_ff_exp.
  // n_ff is then unused by the engine.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // 1 .. n_expert
  int64_t n_ff_exp = 0;
  bool is_moe() const { return n_expert > 0; }
  // A shared expert beside the routed ones (qwen35moe, qwen3next): a SwiGLU
  // FFN of this width (blk.N.ffn_{gate,up,down}_shexp) every token runs,
  // its output scaled by sigmoid(blk.N.ffn_gate_inp_shexp · x) and added
  // to the experts' sum. 0: none.
  int64_t n_ff_shexp = 0;

  // Hybrid linear-attention models (qwen35, qwen35moe, qwen3next): layer l
  // is gated full attention when (l + 1) % full_attention_interval == 0
  // and a Gated DeltaNet layer otherwise (0: every layer attends). A
  // DeltaNet layer keeps no KV: each sequence holds a fixed-size state per
  // such layer (a short causal convolution's last inputs and one
  // ssm_state_size² matrix per value head; RecurrentStateFloats).
  int64_t full_attention_interval = 0;
  bool IsRecurrentLayer(int64_t layer) const {
    return full_attention_interval > 0 &&
           (layer + 1) % full_attention_interval != 0;
  }
  int64_t ssm_conv_kernel = 0;   // ssm.conv_kernel: the convolution's taps
  int64_t ssm_state_size = 0;    // ssm.state_size: key and value head size
  int64_t ssm_k_heads = 0;       // ssm.group_count: key (and query) heads
  int64_t ssm_v_heads = 0;       // ssm.time_step_rank: value heads
  // Which key head value head h reads: h / (v/k heads) when grouped
  // (qwen3next), h % k heads when tiled (qwen35, qwen35moe).
  bool ssm_grouped_heads = false;
  // beta and alpha from one projection blk.N.ssm_ba laid out per key head
  // (beta × v/k heads, then alpha × v/k heads: qwen3next) instead of
  // blk.N.ssm_beta and blk.N.ssm_alpha.
  bool ssm_fused_ba = false;
  // Gated full attention (the hybrids): blk.N.attn_q holds per head
  // head_dim query rows then head_dim gate rows, and attention's output is
  // multiplied by sigmoid(gate) before attn_output.
  bool attn_output_gate = false;
  int64_t ssm_key_dim() const { return ssm_k_heads * ssm_state_size; }
  int64_t ssm_value_dim() const { return ssm_v_heads * ssm_state_size; }
  // The convolution's channels: q, k (key heads) and v (value heads).
  int64_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
  int64_t NumRecurrentLayers() const;
  // Floats of one sequence's state in one DeltaNet layer: the convolution's
  // last conv_kernel - 1 inputs, then the value heads' state matrices.
  int64_t RecurrentStateFloats() const {
    return (ssm_conv_kernel - 1) * ssm_conv_dim() +
           ssm_v_heads * ssm_state_size * ssm_state_size;
  }
  // Bytes of one sequence's state over every DeltaNet layer (float32).
  int64_t RecurrentStateBytes() const {
    return NumRecurrentLayers() * RecurrentStateFloats() * 4;
  }

  // Weights in the transformer (embedding, blocks, norms, every expert, and
  // the output matrix unless tied), computed from the shape.
  int64_t ParameterCount() const;
  // The weights one token computes with: ParameterCount() with only
  // n_expert_used experts per layer (equal to it for a dense model).
  int64_t ActiveParameterCount() const;
};

// Reads `general.architecture` and its `<arch>.*` keys. Errors name the key:
// unknown architecture (naming it), a missing required key, or a value that
// makes no sense (zero heads, heads not dividing the width, KV heads not
// dividing heads, ...). qwen3moe: expert_count, expert_used_count (at most
// expert_count) and expert_feed_forward_length (default feed_forward_length
// / expert_used_count, as llama.cpp); keys that would change its routing
// math (expert_group_count > 1, expert_shared_count > 0, a gating function
// other than softmax, expert_weights_norm false, expert_weights_scale other
// than 1) are refused naming the key. `<arch>.pooling_type` above 3 (rank)
// is refused naming the key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

// Checks that every tensor the architecture needs is present with the shape
// `config` implies; NotFound / InvalidArgument naming the tensor otherwise.
// MoE layers have blk.N.ffn_gate_inp [n_embd, n_expert] and the 3-D
// ffn_{gate,up}_exps [n_embd, n_ff_exp, n_expert], ffn_down_exps [n_ff_exp,
// n_embd, n_expert] in place of ffn_{gate,up,down}.
absl::Status CheckModelTensors(const GgufFile& file, const ModelConfig& config);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_MODEL_CONFIG_H_
