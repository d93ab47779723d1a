#ifndef PACELINE_ENGINE_MODEL_MEMORY_PLAN_H_
#define PACELINE_ENGINE_MODEL_MEMORY_PLAN_H_

// The memory planner: how many bytes a model's weights and its KV cache take
// for a given load, and how many sequences fit in a memory budget
// (DESIGN.md §1, "memory is the first constraint").
//
//   weights          = parameters × bytes per parameter of a uniform weights
//                      dtype; for a mix (weight_recipe.h, e.g. q4_k_m) each
//                      matrix in its recipe type and the rest (norms,
//                      biases) in F32, as the files store them; or a GGUF
//                      file's own tensor bytes
//   KV per token     = 2 (K and V) × layers × kv_heads × head_dim × bytes per
//                      element of the KV dtype (Q8_0: 34 bytes per 32)
//   KV per sequence  = KV per token × context; with sliding layers whose
//                      windows are released (kv_layout.h), per KV group:
//                      slots × KV per layer-token × tokens it holds —
//                      context for a full group, and for a windowed group
//                      of window W only the blocks a decoding sequence
//                      holds (GroupBlocksToHold: ceil(W / B) + 1 blocks of
//                      B tokens), so Gemma 3's 5:1 layers keep about 1/6
//                      of the bytes at long context
//                      A hybrid model's DeltaNet layers keep no KV (only
//                      its attention layers count) but a fixed state per
//                      sequence: state per sequence = its
//                      ModelConfig::RecurrentStateBytes, whatever the
//                      context
//   KV               = KV per sequence × sequences (state likewise)
//   rule of thumb    = weights × 1.3 (the field's estimate of weights plus
//                      KV cache and activations)
//   sequences fit    = floor((memory − weights) / (KV + state per
//                      sequence))
//   read per token   = the weight bytes one decode step of one sequence
//                      reads: every matrix but the embedding (one row), and
//                      of a mixture of experts only the n_expert_used
//                      experts a token runs; the weights stay resident in
//                      full (all experts)
//
// Everything here is a pure function; all arithmetic is checked for 64-bit
// overflow (OutOfRange) instead of wrapping.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_recipe.h"

namespace paceline::engine {

// KV cache element types by the lower-case names the CLI uses: f32, f16,
// bf16, q8_0. InvalidArgument naming the accepted names otherwise. (Weights
// dtypes: weight_recipe.h ParseWeightsDtype.)
absl::StatusOr<GgmlType> ParseKvDtype(absl::string_view name);

// The lower-case name of a type ("q4_0", "f16"): ggml's spelling
// lower-cased.
std::string DtypeName(GgmlType type);

// The sum of a GGUF file's tensor data bytes (its weights as stored, without
// the header or alignment padding). OutOfRange on overflow.
absl::StatusOr<uint64_t> GgufTensorBytes(const GgufFile& file);

// Of those, the bytes one decode step of one token reads for a model of
// shape `config`: all tensors but token_embd.weight (unless the output is
// tied to it), and of each 3-D expert tensor (blk.N.ffn_*_exps) only
// n_expert_used / n_expert of its bytes.
uint64_t GgufTensorBytesPerToken(const GgufFile& file,
                                 const ModelConfig& config);

struct MemoryPlanRequest {
  // Where the weight bytes come from: exactly one of the two.
  std::optional<WeightRecipe> weights_recipe;  // by type (see the top)
  std::optional<uint64_t> weights_file_bytes;  // a file's own tensor bytes
  // With weights_file_bytes: GgufTensorBytesPerToken of the file (else
  // read per token is estimated from the shape at the file's average bytes
  // per weight).
  std::optional<uint64_t> weights_file_bytes_per_token;

  GgmlType kv_type = GgmlType::kF16;     // a plain type or Q8_0
  int64_t context = 0;                   // tokens per sequence, > 0
  int64_t sequences = 0;                 // concurrent sequences, > 0
  std::optional<uint64_t> memory_bytes;  // the budget, if any
  // Sliding layers' K/V beyond their window given back (the CPU engine's
  // default, CpuEngineOptions::kv_window_release), in blocks of this many
  // tokens. No effect on a model without sliding layers.
  bool window_release = true;
  int64_t block_size = 16;  // > 0
};

// How the plan compares with a memory budget.
struct MemoryFit {
  uint64_t memory_bytes = 0;
  // The weights alone fit; when false, they exceed the budget by
  // `weights_shortfall_bytes` and no sequence fits.
  bool weights_fit = false;
  uint64_t weights_shortfall_bytes = 0;
  // floor((memory − weights) / (KV + state per sequence)); 0 when the
  // weights do not fit. Fits in int64_t: KV per sequence is at least 2
  // bytes.
  int64_t sequences_that_fit = 0;
  // The requested sequences fit (total <= memory); when false the total
  // exceeds the budget by `shortfall_bytes`.
  bool fits = false;
  uint64_t shortfall_bytes = 0;
};

struct MemoryPlan {
  int64_t parameters = 0;     // ModelConfig::ParameterCount()
  int64_t active_parameters = 0;  // ModelConfig::ActiveParameterCount()
  std::string weights_dtype;  // "f16", "q4_0", "q4_k_m", ..., or "file"
  uint64_t weights_bytes = 0;  // resident: every expert of a MoE model
  double weights_bits_per_weight = 0;  // weights_bytes × 8 / parameters
  // Weight bytes one decode step at batch 1 reads (see the top).
  uint64_t weights_read_bytes_per_token = 0;
  GgmlType kv_dtype = GgmlType::kF16;  // F32, F16, BF16 (CUDA) or Q8_0
  // Layers with KV and DeltaNet layers (ModelConfig::IsRecurrentLayer).
  int64_t attention_layers = 0;
  int64_t recurrent_layers = 0;
  uint64_t kv_bytes_per_token = 0;  // every attention layer's K and V
  // The recurrent state one sequence holds (0 without DeltaNet layers),
  // and that of `sequences`.
  uint64_t state_bytes_per_sequence = 0;
  uint64_t state_bytes = 0;
  int64_t context = 0;
  int64_t sequences = 0;
  // One sequence of `context` tokens (see the top), and the same keeping
  // every layer's whole history (kv_bytes_per_token × context); equal
  // without released windows.
  uint64_t kv_bytes_per_sequence = 0;
  uint64_t kv_bytes_per_sequence_full = 0;
  int32_t kv_groups = 1;     // KV groups (kv_layout.h); 1 = full history
  int64_t kv_slots = 0;      // layers per block of a group
  uint64_t kv_bytes = 0;     // kv_bytes_per_sequence × sequences
  uint64_t total_bytes = 0;  // weights + KV + state
  uint64_t rule_of_thumb_bytes = 0;  // floor(weights × 1.3)
  std::optional<MemoryFit> fit;      // present when a budget was given
};

// Plans `request` for a model of shape `config`. InvalidArgument when the
// shape has no layers, KV heads or head size (head_dim 0 falls back to
// n_embd / n_heads), when the parameter count is not positive, when context
// or sequences are not positive, when not exactly one weights source is set,
// or when the KV type is block-quantized other than Q8_0, or block_size is
// not positive; OutOfRange when a byte count overflows 64 bits.
absl::StatusOr<MemoryPlan> PlanMemory(const ModelConfig& config,
                                      const MemoryPlanRequest& request);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_MODEL_MEMORY_PLAN_H_
