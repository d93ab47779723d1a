#ifndef PACELINE_ENGINE_MODEL_WEIGHT_RECIPE_H_
#define PACELINE_ENGINE_MODEL_WEIGHT_RECIPE_H_

// Which storage type each weight matrix of a model gets: one type for all of
// them ("q8_0", "q4_k"), or one of llama.cpp's K-quant file types, which mix
// types by tensor and layer ("q4_k_m": mostly Q4_K, the output head and half
// the layers' attn_v / ffn_down in Q6_K). The dummy model source builds
// weights by a recipe and the memory planner sizes them by one.
//
// The mixes follow llama.cpp's llama_tensor_get_type (src/llama-quant.cpp,
// 2026-08) for dense models, without its special cases for Falcon, 70B
// models and 8-expert MoE models.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"

namespace paceline::engine {

// llama.cpp's file types that mix K-quants (LLAMA_FTYPE_MOSTLY_*).
enum class WeightMix : uint8_t {
  kUniform,   // every matrix in one type
  kQ2_K,      // Q2_K; attn_v Q3_K (Q4_K with >= 4 query heads per KV head),
              // attn_output and ffn_down Q3_K
  kQ3_K_M,    // Q3_K; attn_v Q5_K in layers 0-1, else Q4_K; attn_output
              // Q4_K; ffn_down Q5_K in the first 1/16 of the layers, else Q4_K
  kQ4_K_M,    // Q4_K; attn_v and ffn_down Q6_K in the layers that
              // UsesMoreBits
  kQ5_K_M,    // Q5_K; likewise Q6_K
  kMxfp4Moe,  // a mixture of experts' expert matrices MXFP4, every other
              // matrix (the head included) Q8_0: llama.cpp's MXFP4_MOE
};
// The K-quant mixes store the output head (the embedding when tied) as Q6_K, or
// Q8_0 when its width is not a multiple of 256, and apply llama.cpp's
// fallback to other matrices whose width is not a multiple of the block:
// Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16
// when even that block does not divide the width.

// The weight matrices of a dense Llama-family model.
enum class MatrixRole : uint8_t {
  kTokenEmbd,
  kOutput,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kFfnGate,
  kFfnUp,
  kFfnDown,
  // A MoE's shared expert (ModelConfig::n_ff_shexp): mixed as ffn_down
  // for the down matrix (llama.cpp matches the name), else the base type.
  kFfnGateShexp,
  kFfnUpShexp,
  kFfnDownShexp,
  // A Gated DeltaNet layer's (the hybrids): attn_qkv mixed as attn_v (as
  // llama.cpp's quantizer does), the others the base type.
  kSsmQkv,
  kSsmGate,  // attn_gate: the output gate z
  kSsmBeta,  // ssm_beta, or qwen3next's fused ssm_ba
  kSsmAlpha,
  kSsmOut,
};

struct ModelMatrix {
  MatrixRole role;
  int64_t layer;  // -1 for the embedding and the output head
  int64_t rows;   // output features
  int64_t cols;   // input features
};

// The matrices of `config` (the output head only when not tied): the
// embedding, the output head, then each layer's seven — for a mixture of
// experts the FFN three as the files store them, every expert's rows
// stacked (the router, kept in F32, is not one of them), then a shared
// expert's three; a DeltaNet layer's five (four with a fused ssm_ba) in
// place of the attention's four, whose attn_q holds the gate rows too
// where ModelConfig::attn_output_gate.
std::vector<ModelMatrix> ModelMatrices(const ModelConfig& config);

// llama.cpp's choice of the layers that get more bits in Q4_K_M / Q5_K_M:
// the first and last eighth of the layers and every third one between.
bool UsesMoreBits(int64_t layer, int64_t n_layers);

class WeightRecipe {
 public:
  // Every matrix stored as `type`.
  static WeightRecipe Uniform(GgmlType type) {
    return WeightRecipe(WeightMix::kUniform, type);
  }
  // A llama.cpp file type; `mix` is not kUniform.
  static WeightRecipe Mix(WeightMix mix);

  WeightMix mix() const { return mix_; }
  // The uniform type, or the mix's most common one (Q4_K for Q4_K_M).
  GgmlType base_type() const { return base_; }
  // The name ParseWeightsDtype() reads: "q8_0", "q4_k", "q4_k_m"; a uniform
  // type without one reads "q2_k (uniform)".
  std::string name() const;

  // The type of matrix `m` of a model shaped like `config` (a uniform recipe
  // gives its type whatever the width; mixes follow the table above).
  GgmlType TypeOf(const ModelConfig& config, const ModelMatrix& m) const;

  bool operator==(const WeightRecipe& other) const = default;

 private:
  WeightRecipe(WeightMix mix, GgmlType base) : mix_(mix), base_(base) {}
  GgmlType MixedType(const ModelConfig& config, const ModelMatrix& m) const;

  WeightMix mix_;
  GgmlType base_;
};

// The weights dtypes by the lower-case names the CLI and dummy: specs use:
// f32, f16, bf16, q8_0, q4_0, q6_k, q5_k, q4_k, q3_k (uniform), and q5_k_m,
// q4_k_m, q3_k_m, q2_k (llama.cpp's file types of those names: a Q2_K file
// mixes Q2_K with Q3_K, Q4_K and Q6_K). InvalidArgument naming the accepted
// names otherwise.
absl::StatusOr<WeightRecipe> ParseWeightsDtype(absl::string_view name);

// The accepted names, comma-separated, for usage and error messages.
std::string WeightsDtypeNames();

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_WEIGHT_RECIPE_H_
