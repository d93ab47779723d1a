#ifndef PACELINE_ENGINE_MODEL_LAYER_PROGRAM_H_
#define PACELINE_ENGINE_MODEL_LAYER_PROGRAM_H_

// A transformer layer as the sequence of operations an engine runs: each
// architecture describes its layer once (engine/model/arch/, one file
// each), and each backend implements every operation once and runs the
// program of each layer (cpu/cpu_engine.h, cuda/cuda_engine.h). A new
// architecture is a description, its GGUF keys and tensors, and the
// operations it adds.
//
// The operations read and write a step's activation buffers (Buf: n rows
// each, one per token of the step) and a layer's weights (Weight: the
// fields of weights.h's LayerWeights).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"

namespace paceline::engine {

// A step's activation buffers (n rows each).
enum class Buf : int8_t {
  kX,     // (n_embd) the residual stream
  kH,     // (n_embd) a sub-layer's normed input
  kAtt,   // (q_dim) attention's output
  kProj,  // (n_embd) a sub-layer's output before it joins the residual
};

// A layer's weights (LayerWeights' fields).
enum class Weight : int8_t {
  kAttnNorm,
  kAttnOutput,
  kFfnNorm,
  kPostAttnNorm,  // gemma3's post_attention_norm
  kPostFfnNorm,   // gemma3's post_ffw_norm
};

enum class OpKind : int8_t {
  // dst = RMSNorm(src) · weight, row by row (width n_embd).
  kRmsNorm,
  // q, k, v = src Wq, src Wk, src Wv; then, per token: + the Q/K/V biases
  // (Op::qkv_bias), per-head RMSNorm of q and k (Op::qk_norm), RoPE at the
  // token's position (the sliding layers' RoPE with Op::local_rope); k and
  // v stored in the token's KV-cache slot.
  kQkvRope,
  // kAtt = paged causal attention of q over the cache (GQA), scale
  // ModelConfig::attention_scale (or 1/sqrt(head_dim)); over the last
  // Op::window positions only when it is not 0; with Op::sinks, each
  // head's learned sink logit (LayerWeights::attn_sinks) joins the
  // softmax's denominator.
  kAttention,
  // dst = src W (weight: a matrix), + the matrix's bias with Op::bias;
  // dst += that with Op::accumulate (the residual add, which a backend may
  // fuse into the matmul).
  kMatMul,
  // dst += src.
  kAdd,
  // dst = a Gated DeltaNet layer of src (the hybrids' linear attention,
  // ModelConfig's ssm_* fields): the q/k/v projection through a short
  // causal convolution (its state: the last conv_kernel - 1 inputs) and
  // SiLU; q, k L2-normalised; per value head, with beta = sigmoid(b) and
  // g = softplus(a + dt_bias) · ssm_a from their projections, the state
  // S ← exp(g) S, S ← S + beta (v − S k) kᵀ and the output S q /
  // sqrt(state_size); RMSNorm(o) · ssm_norm · SiLU(z) per head, z the gate
  // projection; then ssm_out. The state lives in the sequence's state slot
  // (SequenceSlice::state_slot), zeroed where a slice starts at position 0.
  kDeltaNet,
  // dst = the feed-forward of src: gated by Op::activation (SwiGLU, GeGLU,
  // gpt-oss's SwiGLU) over ffn_gate, ffn_up, ffn_down, or the routed
  // experts' sum of a MoE layer (Op::moe; with ModelConfig::moe_biases the
  // router's and experts' biases; with ModelConfig::n_ff_shexp plus the
  // gated shared expert); dst += it with Op::accumulate.
  kFeedForward,
};

struct Op {
  OpKind kind = OpKind::kRmsNorm;
  Buf src = Buf::kX;
  Buf dst = Buf::kX;
  Weight weight = Weight::kAttnNorm;                // kRmsNorm, kMatMul
  bool qkv_bias = false;                            // kQkvRope
  bool qk_norm = false;                             // kQkvRope
  bool local_rope = false;                          // kQkvRope
  int64_t window = 0;                               // kAttention
  bool sinks = false;                               // kAttention
  // kQkvRope: attn_q's rows hold per head the query then an output gate
  // (ModelConfig::attn_output_gate), kept for kAttention's output_gate.
  // kAttention: its output times sigmoid(that gate).
  bool output_gate = false;                         // kQkvRope, kAttention
  bool bias = false;                                // kMatMul
  bool moe = false;                                 // kFeedForward
  FfnActivation activation = FfnActivation::kSilu;  // kFeedForward
  bool accumulate = false;                          // kMatMul, kFeedForward
};

struct LayerProgram {
  std::vector<Op> ops;
};

// One architecture (engine/model/arch/, one file each): what its GGUF
// files hold beyond the common keys, and its layers.
struct Architecture {
  absl::string_view name;  // general.architecture
  RopeLayout rope_layout;
  bool qk_norm;  // per-head Q/K RMSNorm weights (blk.N.attn_{q,k}_norm)
  // Whether Q/K/V biases are looked for (blk.0.attn_q.bias): then
  // ModelConfig::qkv_bias says whether the file has them.
  bool may_have_qkv_bias;
  bool moe;  // a mixture-of-experts FFN (the expert_* keys)
  LayerProgram (*layer)(const ModelConfig& config, int64_t layer);
  // The architecture's own keys, read after the common ones (null: none).
  absl::Status (*read_keys)(const GgufFile& file,
                            ModelConfig* config) = nullptr;
  // What the architecture fixes that its files do not say (the embedding
  // scale, biases, the activation, ...), set after its keys and for a
  // named shape (model_shapes.h) alike (null: nothing).
  void (*configure)(ModelConfig* config) = nullptr;
};

// The architecture named `name` (general.architecture); null for one
// without a description.
const Architecture* FindArchitecture(absl::string_view name);
// Their names, comma-separated, for errors.
std::string SupportedArchitectures();

// Every layer's program for `config`; NotFound naming the architecture
// when it has no description.
absl::StatusOr<std::vector<LayerProgram>> LayerPrograms(
    const ModelConfig& config);

// Builders the descriptions share.
namespace ops {
Op RmsNorm(Buf src, Buf dst, Weight weight);
Op QkvRope(Buf src, bool qkv_bias, bool qk_norm);
Op Attention();
Op MatMul(Buf src, Buf dst, Weight weight, bool accumulate);
Op Add(Buf src, Buf dst);
Op FeedForward(Buf src, Buf dst, bool moe, bool accumulate);
Op DeltaNet(Buf src, Buf dst);
}  // namespace ops

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_LAYER_PROGRAM_H_
