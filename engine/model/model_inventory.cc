#include "engine/model/model_inventory.h"

#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

// When a listed tensor is read.
enum class TensorNeed {
  kAlways,
  kIfPresent,     // read whenever the file has it
  kUntiedOutput,  // !config.tied_output
  kQkvBias,       // config.qkv_bias
  kQkNorm,        // config.qk_norm
  kAttentionLayer,  // a layer that is not a DeltaNet layer (the hybrids)
  kDeltaNetLayer,   // a DeltaNet layer (config.IsRecurrentLayer)
  kSplitBa,         // a DeltaNet layer without config.ssm_fused_ba
  kFusedBa,         // a DeltaNet layer with config.ssm_fused_ba
  kNever,         // known not to change the forward pass: warned about
};

// `name` is the full name; "blk.N." stands for every layer's prefix.
struct TensorUse {
  absl::string_view name;
  TensorNeed need;
};

enum class KeyUse {
  kRead,           // ModelConfigFromGguf reads it
  kInformational,  // describes the file, changes nothing computed
  kUnsupported,    // changes the math; not implemented: fails the load
};

// `suffix` follows "<arch>.". An unsupported key with a `neutral` value
// that the file holds changes nothing and passes.
struct KeyRule {
  absl::string_view suffix;
  KeyUse use;
  std::optional<double> neutral = std::nullopt;
};

constexpr TensorUse kDecoderModelTensors[] = {
    {"token_embd.weight", TensorNeed::kAlways},
    {"output_norm.weight", TensorNeed::kAlways},
    {"output.weight", TensorNeed::kUntiedOutput},
    {"rope_freqs.weight", TensorNeed::kIfPresent},  // Llama 3 factors
};

constexpr TensorUse kAttentionLayerTensors[] = {
    {"blk.N.attn_norm.weight", TensorNeed::kAlways},
    {"blk.N.attn_q.weight", TensorNeed::kAlways},
    {"blk.N.attn_k.weight", TensorNeed::kAlways},
    {"blk.N.attn_v.weight", TensorNeed::kAlways},
    {"blk.N.attn_output.weight", TensorNeed::kAlways},
    {"blk.N.attn_q.bias", TensorNeed::kQkvBias},
    {"blk.N.attn_k.bias", TensorNeed::kQkvBias},
    {"blk.N.attn_v.bias", TensorNeed::kQkvBias},
    {"blk.N.attn_q_norm.weight", TensorNeed::kQkNorm},
    {"blk.N.attn_k_norm.weight", TensorNeed::kQkNorm},
    // Precomputed rotary inverse frequencies (the checkpoint's
    // rotary_emb.inv_freq buffer) some old conversions kept; the engine
    // computes them from the rope.* keys.
    {"blk.N.attn_rot_embd.weight", TensorNeed::kNever},
};

constexpr TensorUse kDenseFfnLayerTensors[] = {
    {"blk.N.ffn_norm.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down.weight", TensorNeed::kAlways},
};

// qwen3moe's feed-forward: a router and 3-D expert tensors.
constexpr TensorUse kMoeFfnLayerTensors[] = {
    {"blk.N.ffn_norm.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_inp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down_exps.weight", TensorNeed::kAlways},
};

// gemma3's norms after attention and after the feed-forward.
constexpr TensorUse kPostNormLayerTensors[] = {
    {"blk.N.post_attention_norm.weight", TensorNeed::kAlways},
    {"blk.N.post_ffw_norm.weight", TensorNeed::kAlways},
};

// gpt-oss's layer tensors beyond the attention block's (its Q/K/V biases
// are there): the output bias, the sinks, the FFN's input norm stored
// under the name post_attention_norm, and the MoE router and experts with
// their biases.
constexpr TensorUse kGptOssLayerTensors[] = {
    {"blk.N.attn_output.bias", TensorNeed::kAlways},
    {"blk.N.attn_sinks.weight", TensorNeed::kAlways},
    {"blk.N.post_attention_norm.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_inp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_inp.bias", TensorNeed::kAlways},
    {"blk.N.ffn_gate_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_exps.bias", TensorNeed::kAlways},
    {"blk.N.ffn_up_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up_exps.bias", TensorNeed::kAlways},
    {"blk.N.ffn_down_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down_exps.bias", TensorNeed::kAlways},
};

// The hybrids' layers (arch/hybrid.cc): gated full attention on every
// full_attention_interval-th layer, Gated DeltaNet on the others; the FFN's
// norm is post_attention_norm.
constexpr TensorUse kHybridLayerTensors[] = {
    {"blk.N.attn_norm.weight", TensorNeed::kAlways},
    {"blk.N.post_attention_norm.weight", TensorNeed::kAlways},
    {"blk.N.attn_q.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_k.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_v.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_output.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_q_norm.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_k_norm.weight", TensorNeed::kAttentionLayer},
    {"blk.N.attn_qkv.weight", TensorNeed::kDeltaNetLayer},
    {"blk.N.attn_gate.weight", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_conv1d.weight", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_a", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_dt.bias", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_norm.weight", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_out.weight", TensorNeed::kDeltaNetLayer},
    {"blk.N.ssm_beta.weight", TensorNeed::kSplitBa},
    {"blk.N.ssm_alpha.weight", TensorNeed::kSplitBa},
    {"blk.N.ssm_ba.weight", TensorNeed::kFusedBa},
};

constexpr TensorUse kHybridDenseFfnTensors[] = {
    {"blk.N.ffn_gate.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down.weight", TensorNeed::kAlways},
};

// The hybrids' MoE: routed experts and a gated shared expert.
constexpr TensorUse kHybridMoeTensors[] = {
    {"blk.N.ffn_gate_inp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down_exps.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_inp_shexp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_gate_shexp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_up_shexp.weight", TensorNeed::kAlways},
    {"blk.N.ffn_down_shexp.weight", TensorNeed::kAlways},
};

// Read by the hybrids' descriptions (arch/hybrid.cc), which refuse
// M-RoPE sections text positions would not turn and a per-layer
// recurrent pattern, naming the key.
constexpr KeyRule kHybridKeys[] = {
    {"full_attention_interval", KeyUse::kRead},
    {"ssm.conv_kernel", KeyUse::kRead},
    {"ssm.state_size", KeyUse::kRead},
    {"ssm.group_count", KeyUse::kRead},
    {"ssm.time_step_rank", KeyUse::kRead},
    {"ssm.inner_size", KeyUse::kRead},
    {"rope.dimension_sections", KeyUse::kRead},
    {"attention.recurrent_layers", KeyUse::kRead},
    {"expert_shared_feed_forward_length", KeyUse::kRead},
    // Multi-token-prediction layers after the stack (none in these files'
    // block_count); the engine does not run them.
    {"nextn_predict_layers", KeyUse::kUnsupported, 0},
};

// Read by gpt-oss's description (arch/gpt_oss.cc), which refuses a
// rope.freq_base_swa unlike rope.freq_base naming the key.
constexpr KeyRule kGptOssKeys[] = {
    {"attention.sliding_window", KeyUse::kRead},
    {"attention.sliding_window_pattern", KeyUse::kRead},
    {"rope.freq_base_swa", KeyUse::kRead},
};

// Read by gemma3's description (arch/gemma3.cc), which refuses a nonzero
// final_logit_softcapping naming the key. First, over kDecoderKeys.
constexpr KeyRule kGemma3Keys[] = {
    {"attention.sliding_window", KeyUse::kRead},
    {"attention.sliding_window_pattern", KeyUse::kRead},
    {"rope.freq_base_swa", KeyUse::kRead},
    {"final_logit_softcapping", KeyUse::kRead},
};

// Read by ModelConfigFromGguf for qwen3moe (ReadExperts), which itself
// refuses, naming the key, the values that would change its routing
// (expert groups, shared experts, a gating function other than softmax,
// no renormalisation, a weight scale). Listed first, so they override
// kDecoderKeys' dense-architecture rules.
constexpr KeyRule kMoeKeys[] = {
    {"expert_count", KeyUse::kRead},
    {"expert_used_count", KeyUse::kRead},
    {"expert_feed_forward_length", KeyUse::kRead},
    {"expert_group_count", KeyUse::kRead},
    {"expert_shared_count", KeyUse::kRead},
    {"expert_gating_func", KeyUse::kRead},
    {"expert_weights_norm", KeyUse::kRead},
    {"expert_weights_scale", KeyUse::kRead},
};

constexpr KeyRule kDecoderKeys[] = {
    {"context_length", KeyUse::kRead},
    {"embedding_length", KeyUse::kRead},
    {"block_count", KeyUse::kRead},
    {"feed_forward_length", KeyUse::kRead},
    {"vocab_size", KeyUse::kRead},
    {"attention.head_count", KeyUse::kRead},
    {"attention.head_count_kv", KeyUse::kRead},
    {"attention.key_length", KeyUse::kRead},
    {"attention.value_length", KeyUse::kRead},
    {"attention.layer_norm_rms_epsilon", KeyUse::kRead},
    {"rope.dimension_count", KeyUse::kRead},
    {"rope.freq_base", KeyUse::kRead},
    {"rope.scale_linear", KeyUse::kRead},
    {"rope.scaling.type", KeyUse::kRead},
    {"rope.scaling.factor", KeyUse::kRead},
    {"rope.scaling.original_context_length", KeyUse::kRead},
    {"rope.scaling.attn_factor", KeyUse::kRead},
    {"rope.scaling.yarn_ext_factor", KeyUse::kRead},
    {"rope.scaling.yarn_attn_factor", KeyUse::kRead},
    {"rope.scaling.yarn_beta_fast", KeyUse::kRead},
    {"rope.scaling.yarn_beta_slow", KeyUse::kRead},
    // An embedding model's pooling (model_config.h: PoolingType).
    {"pooling_type", KeyUse::kRead},
    // Whether the model was fine-tuned at the scaled length.
    {"rope.scaling.finetuned", KeyUse::kInformational},
    // The checkpoint's original layout; conversions already permuted Q/K.
    {"tensor_data_layout", KeyUse::kInformational},
    {"attention.causal", KeyUse::kUnsupported, 1},
    {"attention.sliding_window", KeyUse::kUnsupported, 0},
    {"attention.sliding_window_pattern", KeyUse::kUnsupported},
    {"attention.scale", KeyUse::kUnsupported},
    {"attention.clamp_kqv", KeyUse::kUnsupported, 0},
    {"attention.max_alibi_bias", KeyUse::kUnsupported, 0},
    {"attention.temperature_length", KeyUse::kUnsupported, 0},
    {"attention.temperature_scale", KeyUse::kUnsupported},
    {"attention.q_lora_rank", KeyUse::kUnsupported, 0},
    {"attention.kv_lora_rank", KeyUse::kUnsupported, 0},
    {"attn_logit_softcapping", KeyUse::kUnsupported, 0},
    {"final_logit_softcapping", KeyUse::kUnsupported, 0},
    {"logit_scale", KeyUse::kUnsupported, 1},
    {"embedding_scale", KeyUse::kUnsupported, 1},
    {"residual_scale", KeyUse::kUnsupported, 1},
    {"use_parallel_residual", KeyUse::kUnsupported, 0},
    {"swiglu_clamp_exp", KeyUse::kUnsupported, 0},
    {"rope.dimension_sections", KeyUse::kUnsupported},
    {"rope.freq_base_swa", KeyUse::kUnsupported},
    {"rope.scaling.alpha", KeyUse::kUnsupported},
    {"rope.scaling.yarn_log_multiplier", KeyUse::kUnsupported, 0},
    {"full_attention_interval", KeyUse::kUnsupported},
    {"leading_dense_block_count", KeyUse::kUnsupported, 0},
    // Mixture of experts, on an architecture read as dense (Mixtral files
    // say "llama"); an MoE architecture's own table reads these.
    {"expert_count", KeyUse::kUnsupported, 0},
    {"expert_used_count", KeyUse::kUnsupported, 0},
    {"expert_feed_forward_length", KeyUse::kUnsupported, 0},
    {"expert_shared_count", KeyUse::kUnsupported, 0},
    {"expert_shared_feed_forward_length", KeyUse::kUnsupported, 0},
    {"expert_weights_scale", KeyUse::kUnsupported},
    {"expert_weights_norm", KeyUse::kUnsupported, 0},
    {"expert_gating_func", KeyUse::kUnsupported},
    {"expert_group_count", KeyUse::kUnsupported, 0},
    {"interleave_moe_layer_step", KeyUse::kUnsupported, 0},
    {"moe_every_n_layers", KeyUse::kUnsupported, 0},
};

// One architecture: the tensors and keys its files may hold. Lists are
// searched in order and the first match wins, so an architecture's own
// list placed first overrides a shared one.
struct ArchInventory {
  absl::string_view arch;
  std::array<absl::Span<const TensorUse>, 4> tensors;
  std::array<absl::Span<const KeyRule>, 3> keys;
};

const ArchInventory kInventories[] = {
    {"llama",
     {kDecoderModelTensors, kAttentionLayerTensors, kDenseFfnLayerTensors},
     {kDecoderKeys}},
    {"qwen2",
     {kDecoderModelTensors, kAttentionLayerTensors, kDenseFfnLayerTensors},
     {kDecoderKeys}},
    {"qwen3",
     {kDecoderModelTensors, kAttentionLayerTensors, kDenseFfnLayerTensors},
     {kDecoderKeys}},
    {"qwen3moe",
     {kDecoderModelTensors, kAttentionLayerTensors, kMoeFfnLayerTensors},
     {kMoeKeys, kDecoderKeys}},
    {"gemma3",
     {kDecoderModelTensors, kAttentionLayerTensors, kDenseFfnLayerTensors,
      kPostNormLayerTensors},
     {kGemma3Keys, kDecoderKeys}},
    {"gpt-oss",
     {kDecoderModelTensors, kAttentionLayerTensors, kGptOssLayerTensors},
     {kGptOssKeys, kMoeKeys, kDecoderKeys}},
    {"qwen35",
     {kDecoderModelTensors, kHybridLayerTensors, kHybridDenseFfnTensors},
     {kHybridKeys, kDecoderKeys}},
    {"qwen35moe",
     {kDecoderModelTensors, kHybridLayerTensors, kHybridMoeTensors},
     {kHybridKeys, kMoeKeys, kDecoderKeys}},
    {"qwen3next",
     {kDecoderModelTensors, kHybridLayerTensors, kHybridMoeTensors},
     {kHybridKeys, kMoeKeys, kDecoderKeys}},
};

const ArchInventory* FindInventory(absl::string_view arch) {
  for (const ArchInventory& a : kInventories) {
    if (a.arch == arch) return &a;
  }
  return nullptr;
}

// "blk.N.<rest>" for a layer of the model, else `name` itself; layers
// outside [0, n_layers) keep their number and so match nothing. `layer`
// receives the layer (-1 for none).
std::string Pattern(absl::string_view name, int64_t n_layers, int64_t* layer) {
  *layer = -1;
  if (!absl::ConsumePrefix(&name, "blk.")) return std::string(name);
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos ||
      !absl::SimpleAtoi(name.substr(0, dot), layer) || *layer < 0 ||
      *layer >= n_layers) {
    *layer = -1;
    return absl::StrCat("blk.", name);
  }
  return absl::StrCat("blk.N.", name.substr(dot + 1));
}

bool IsNeeded(TensorNeed need, const ModelConfig& c, int64_t layer) {
  const bool delta = layer >= 0 && c.IsRecurrentLayer(layer);
  switch (need) {
    case TensorNeed::kAttentionLayer:
      return !delta;
    case TensorNeed::kDeltaNetLayer:
      return delta;
    case TensorNeed::kSplitBa:
      return delta && !c.ssm_fused_ba;
    case TensorNeed::kFusedBa:
      return delta && c.ssm_fused_ba;
    case TensorNeed::kAlways:
    case TensorNeed::kIfPresent:
      return true;
    case TensorNeed::kUntiedOutput:
      return !c.tied_output;
    case TensorNeed::kQkvBias:
      return c.qkv_bias;
    case TensorNeed::kQkNorm:
      return c.qk_norm;
    case TensorNeed::kNever:
      return false;
  }
  return false;
}

const TensorUse* FindTensor(const ArchInventory& inv, absl::string_view pat) {
  for (absl::Span<const TensorUse> list : inv.tensors) {
    for (const TensorUse& t : list) {
      if (t.name == pat) return &t;
    }
  }
  return nullptr;
}

const KeyRule* FindKey(const ArchInventory& inv, absl::string_view suffix) {
  for (absl::Span<const KeyRule> list : inv.keys) {
    for (const KeyRule& k : list) {
      if (k.suffix == suffix) return &k;
    }
  }
  return nullptr;
}

absl::Status CheckTensors(const GgufFile& file, const ModelConfig& c,
                          const ArchInventory& inv, InventoryReport* report) {
  std::vector<std::string> refused;
  for (const GgufTensorInfo& t : file.tensors()) {
    int64_t layer = -1;
    const TensorUse* use = FindTensor(inv, Pattern(t.name, c.n_layers, &layer));
    if (use != nullptr && IsNeeded(use->need, c, layer)) continue;
    if (use != nullptr && use->need == TensorNeed::kNever) {
      report->unused_tensors.push_back(t.name);
    } else {
      refused.push_back(t.name);
    }
  }
  if (refused.empty()) return absl::OkStatus();
  constexpr size_t kNamed = 8;
  const size_t total = refused.size();
  if (total > kNamed) refused.resize(kNamed);
  return absl::InvalidArgumentError(absl::StrCat(
      total == 1 ? "tensor '" : "tensors '", absl::StrJoin(refused, "', '"),
      "'", total > kNamed ? absl::StrCat(" and ", total - kNamed, " more") : "",
      total == 1 ? " is" : " are", " not read by the engine for architecture '",
      c.architecture,
      "' with this configuration; a tensor the engine does not understand "
      "may change the model's math, so the load stops"));
}

// The value of a numeric or bool key, if it has one.
std::optional<double> NumericValue(const GgufFile& file,
                                   const std::string& key) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufValueType::kBool) return v->u != 0 ? 1.0 : 0.0;
  absl::StatusOr<double> f = file.GetFloat(key);
  if (!f.ok()) return std::nullopt;
  return *f;
}

absl::Status CheckKeys(const GgufFile& file, const ModelConfig& c,
                       const ArchInventory& inv, InventoryReport* report) {
  const std::string prefix = absl::StrCat(c.architecture, ".");
  for (const auto& [key, value] : file.metadata()) {
    absl::string_view k = key;
    if (absl::StartsWith(k, "general.") || absl::StartsWith(k, "tokenizer.") ||
        absl::StartsWith(k, "quantize.")) {
      continue;
    }
    if (!absl::ConsumePrefix(&k, prefix)) {
      report->unknown_keys.push_back(key);
      continue;
    }
    const KeyRule* rule = FindKey(inv, k);
    if (rule == nullptr) {
      report->unknown_keys.push_back(key);
      continue;
    }
    if (rule->use != KeyUse::kUnsupported) continue;
    const std::optional<double> v = NumericValue(file, key);
    if (rule->neutral.has_value() && v.has_value() && *v == *rule->neutral) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key, "' changes the model's math in a way ",
        "the engine does not implement for architecture '", c.architecture, "'",
        v.has_value() ? absl::StrCat(" (value ", *v, ")") : "",
        "; refusing the file rather than computing something else"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> InventoryReport::WarningLines() const {
  std::vector<std::string> lines;
  if (!unused_tensors.empty()) {
    lines.push_back(
        absl::StrCat("ignoring tensors known not to change the forward pass: ",
                     absl::StrJoin(unused_tensors, ", ")));
  }
  if (!unknown_keys.empty()) {
    lines.push_back(absl::StrCat("ignoring metadata keys the engine does not ",
                                 "know: ", absl::StrJoin(unknown_keys, ", ")));
  }
  return lines;
}

absl::StatusOr<InventoryReport> CheckModelInventory(const GgufFile& file,
                                                    const ModelConfig& config) {
  const ArchInventory* inv = FindInventory(config.architecture);
  if (inv == nullptr) {
    return absl::InternalError(absl::StrCat(
        "no tensor/key inventory for architecture '", config.architecture,
        "' (engine/model/model_inventory.cc)"));
  }
  InventoryReport report;
  RETURN_IF_ERROR(CheckTensors(file, config, *inv, &report));
  RETURN_IF_ERROR(CheckKeys(file, config, *inv, &report));
  return report;
}

}  // namespace paceline::engine
