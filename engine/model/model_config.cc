#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/model/gguf_keys.h"
#include "engine/model/layer_program.h"

namespace paceline::engine {
namespace {

// Bounds far beyond any released model. They reject nonsense early and keep
// ParameterCount (and the memory planner's products) inside int64.
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // n_embd, heads * head_dim
constexpr int64_t kMaxHeads = int64_t{1} << 14;
constexpr int64_t kMaxFf = int64_t{1} << 22;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxContext = int64_t{1} << 30;
constexpr int64_t kMaxExperts = int64_t{1} << 12;

absl::Status OutOfBounds(absl::string_view key, int64_t value, int64_t lo,
                         int64_t hi) {
  return absl::InvalidArgumentError(absl::StrCat(
      "metadata key '", key, "' is ", value, "; want ", lo, " to ", hi));
}

// `<arch>.vocab_size`, else the tokenizer's token list, else the embedding.
absl::StatusOr<int64_t> ReadVocabSize(const GgufFile& file,
                                      const std::string& arch) {
  const std::string key = absl::StrCat(arch, ".vocab_size");
  if (file.Has(key)) return ReadDim(file, key, kMaxVocab, std::nullopt);
  if (const GgufValue* tokens = file.Find("tokenizer.ggml.tokens")) {
    if (tokens->type != GgufValueType::kArray) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key 'tokenizer.ggml.tokens' is ",
          GgufValueTypeName(tokens->type), ", want array<string>"));
    }
    const auto n = static_cast<int64_t>(tokens->elements.size());
    if (n == 0 || n > kMaxVocab) {
      return OutOfBounds("tokenizer.ggml.tokens (length)", n, 1, kMaxVocab);
    }
    return n;
  }
  if (const GgufTensorInfo* embd = file.FindTensor("token_embd.weight")) {
    if (embd->shape.size() == 2 && embd->shape[1] <= kMaxVocab) {
      return embd->shape[1];
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot tell the vocabulary size: no metadata key '", key,
      "', no 'tokenizer.ggml.tokens' and no 2-d token_embd.weight"));
}

// The YaRN keys (conversions write them from the Hugging Face config's
// extrapolation_factor, attention_factor, beta_fast, beta_slow). Absent
// keys keep the published defaults ModelConfig holds.
absl::Status ReadYarn(const GgufFile& file, const std::string& arch,
                      ModelConfig* c) {
  const std::string p = absl::StrCat(arch, ".rope.scaling.yarn_");
  const std::string ext_key = p + "ext_factor";
  ASSIGN_OR_RETURN(c->yarn_ext_factor,
                   OrDefault(file.GetFloat(ext_key), c->yarn_ext_factor));
  if (!(c->yarn_ext_factor >= 0 && c->yarn_ext_factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("metadata key '", ext_key,
                                                   "' is ", c->yarn_ext_factor,
                                                   "; want 0 to 1"));
  }
  if (file.Has(p + "attn_factor")) {
    ASSIGN_OR_RETURN(c->yarn_attn_factor,
                     ReadPositive(file, p + "attn_factor", 1.0));
  }
  ASSIGN_OR_RETURN(c->yarn_beta_fast,
                   ReadPositive(file, p + "beta_fast", c->yarn_beta_fast));
  ASSIGN_OR_RETURN(c->yarn_beta_slow,
                   ReadPositive(file, p + "beta_slow", c->yarn_beta_slow));
  if (c->yarn_beta_slow > c->yarn_beta_fast) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata keys '", p, "beta_slow' (", c->yarn_beta_slow,
                     ") and '", p, "beta_fast' (", c->yarn_beta_fast,
                     "): beta_slow must not exceed beta_fast"));
  }
  return absl::OkStatus();
}

// Fills the rope scaling fields. llama.cpp's reading, which files are
// written for: the type defaults to linear, and a factor of 0 means 1.
absl::Status ReadRopeScaling(const GgufFile& file, const std::string& arch,
                             ModelConfig* c) {
  const std::string type_key = absl::StrCat(arch, ".rope.scaling.type");
  const std::string factor_key = absl::StrCat(arch, ".rope.scaling.factor");
  const std::string old_key = absl::StrCat(arch, ".rope.scale_linear");
  const std::string orig_key =
      absl::StrCat(arch, ".rope.scaling.original_context_length");

  ASSIGN_OR_RETURN(
      const absl::string_view type,
      OrDefault<absl::string_view>(file.GetString(type_key), "linear"));
  const std::string& used_key = file.Has(factor_key) ? factor_key : old_key;
  ASSIGN_OR_RETURN(double factor, OrDefault(file.GetFloat(used_key), 0.0));
  if (!std::isfinite(factor) || factor < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", used_key, "' is ", factor,
                     "; want a finite number >= 0"));
  }
  if (factor == 0) factor = 1;

  if (type == "none") {
    c->rope_scaling = RopeScaling::kNone;
    factor = 1;
  } else if (type == "linear") {
    c->rope_scaling = factor == 1 ? RopeScaling::kNone : RopeScaling::kLinear;
  } else if (type == "yarn") {
    c->rope_scaling = RopeScaling::kYarn;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", type_key, "': unsupported rope scaling type '", type,
        "'; supported: none, linear, yarn"));
  }
  c->rope_scaling_factor = factor;

  // Yarn needs the training context it extends; llama.cpp falls back to
  // the context length.
  const int64_t orig_default =
      c->rope_scaling == RopeScaling::kYarn ? c->context_length : 0;
  if (file.Has(orig_key)) {
    ASSIGN_OR_RETURN(c->rope_original_context,
                     ReadDim(file, orig_key, kMaxContext, std::nullopt));
  } else {
    c->rope_original_context = orig_default;
  }
  ASSIGN_OR_RETURN(
      c->rope_attn_factor,
      ReadPositive(file, absl::StrCat(arch, ".rope.scaling.attn_factor"), 1.0));
  if (c->rope_scaling == RopeScaling::kYarn) {
    RETURN_IF_ERROR(ReadYarn(file, arch, c));
  }
  return absl::OkStatus();
}

// `<arch>.pooling_type` (llama.cpp's enum): absent or 0 is none.
absl::StatusOr<PoolingType> ReadPooling(const GgufFile& file,
                                        const std::string& arch) {
  const std::string key = absl::StrCat(arch, ".pooling_type");
  if (!file.Has(key)) return PoolingType::kNone;
  ASSIGN_OR_RETURN(const uint64_t raw, file.GetUint(key));
  if (raw > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", key, "' is ", raw,
                     "; supported: 0 none, 1 mean, 2 cls, 3 last"));
  }
  return static_cast<PoolingType>(raw);
}

// Reads head counts, head size and rope dims, then checks they fit together.
absl::Status ReadAttention(const GgufFile& file, const std::string& arch,
                           ModelConfig* c) {
  const std::string heads_key = absl::StrCat(arch, ".attention.head_count");
  const std::string kv_key = absl::StrCat(arch, ".attention.head_count_kv");
  const std::string key_len_key = absl::StrCat(arch, ".attention.key_length");
  const std::string value_len_key =
      absl::StrCat(arch, ".attention.value_length");
  const std::string rope_dim_key = absl::StrCat(arch, ".rope.dimension_count");

  ASSIGN_OR_RETURN(c->n_heads,
                   ReadDim(file, heads_key, kMaxHeads, std::nullopt));
  ASSIGN_OR_RETURN(c->n_kv_heads, ReadDim(file, kv_key, kMaxHeads, c->n_heads));
  if (c->n_heads % c->n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", kv_key, "' is ", c->n_kv_heads,
                     ", which does not divide ", heads_key, " = ", c->n_heads));
  }
  if (!file.Has(key_len_key) && c->n_embd % c->n_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", heads_key, "' is ", c->n_heads,
                     ", which does not divide the embedding length ", c->n_embd,
                     ", and there is no '", key_len_key, "'"));
  }
  ASSIGN_OR_RETURN(c->head_dim, ReadDim(file, key_len_key, kMaxWidth,
                                        c->n_embd / c->n_heads));
  if (c->n_heads * c->head_dim > kMaxWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention width ", c->n_heads, " heads x ", c->head_dim,
                     " is over the limit of ", kMaxWidth));
  }
  // One head size serves Q, K and V in this engine.
  ASSIGN_OR_RETURN(const int64_t value_len,
                   ReadDim(file, value_len_key, kMaxWidth, c->head_dim));
  if (value_len != c->head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", value_len_key, "' is ", value_len,
        ", unlike the key length ", c->head_dim, "; not supported"));
  }
  ASSIGN_OR_RETURN(c->rope_dim,
                   ReadDim(file, rope_dim_key, c->head_dim, c->head_dim));
  if (c->rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", rope_dim_key, "' is ", c->rope_dim,
                     "; rope rotates pairs, so it must be even"));
  }
  return absl::OkStatus();
}

// Reads the expert keys. llama.cpp's qwen3moe graph is fixed: softmax over
// all experts, top-k, weights renormalised to sum 1, no scale, no expert
// groups, no shared expert; gpt-oss's (top-k of the logits, a softmax over
// those k) computes the same weights. A key asking for anything
// else is refused rather than silently ignored.
absl::Status ReadExperts(const GgufFile& file, const std::string& arch,
                         ModelConfig* c) {
  const auto key = [&arch](absl::string_view k) {
    return absl::StrCat(arch, ".", k);
  };
  ASSIGN_OR_RETURN(c->n_expert, ReadDim(file, key("expert_count"), kMaxExperts,
                                        std::nullopt));
  ASSIGN_OR_RETURN(c->n_expert_used, ReadDim(file, key("expert_used_count"),
                                             kMaxExperts, std::nullopt));
  if (c->n_expert_used > c->n_expert) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key("expert_used_count"), "' is ", c->n_expert_used,
        ", more than ", key("expert_count"), " = ", c->n_expert));
  }
  ASSIGN_OR_RETURN(c->n_ff_exp,
                   ReadDim(file, key("expert_feed_forward_length"), kMaxFf,
                           std::max<int64_t>(1, c->n_ff / c->n_expert_used)));
  // Keeps ParameterCount inside int64, as the bounds above do.
  constexpr int64_t kMaxExpertsFf = kMaxFf << 4;
  if (c->n_expert * c->n_ff_exp > kMaxExpertsFf) {
    return absl::InvalidArgumentError(absl::StrCat(
        key("expert_count"), " x ", key("expert_feed_forward_length"), " = ",
        c->n_expert, " x ", c->n_ff_exp, " is over the limit of ",
        kMaxExpertsFf));
  }
  const auto refuse = [&](absl::string_view k, absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat(
        "metadata key '", key(k), "': ", why, "; the engine routes by a ",
        "softmax over all experts, top-k, weights renormalised"));
  };
  ASSIGN_OR_RETURN(
      const uint64_t groups,
      OrDefault<uint64_t>(file.GetUint(key("expert_group_count")), 1));
  if (groups > 1) return refuse("expert_group_count", "expert groups");
  ASSIGN_OR_RETURN(
      const uint64_t shared,
      OrDefault<uint64_t>(file.GetUint(key("expert_shared_count")), 0));
  if (shared > 0) return refuse("expert_shared_count", "shared experts");
  ASSIGN_OR_RETURN(
      const uint64_t gating,
      OrDefault<uint64_t>(file.GetUint(key("expert_gating_func")), 1));
  if (gating != 1) return refuse("expert_gating_func", "not softmax (1)");
  ASSIGN_OR_RETURN(const bool norm,
                   OrDefault(file.GetBool(key("expert_weights_norm")), true));
  if (!norm) return refuse("expert_weights_norm", "false");
  ASSIGN_OR_RETURN(const double scale,
                   OrDefault(file.GetFloat(key("expert_weights_scale")), 1.0));
  if (scale != 0 && scale != 1) {
    return refuse("expert_weights_scale", absl::StrCat(scale, ", not 1"));
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const GgufFile& file, const std::string& name,
                        std::vector<int64_t> want) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' is missing"));
  }
  if (t->shape != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' has shape [", absl::StrJoin(t->shape, ", "),
        "], want [", absl::StrJoin(want, ", "), "]"));
  }
  return absl::OkStatus();
}

// The dense FFN's three matrices, or a MoE layer's router and experts.
absl::Status CheckFfnTensors(const GgufFile& file, const ModelConfig& c,
                             const std::string& p) {
  if (!c.is_moe()) {
    RETURN_IF_ERROR(
        CheckShape(file, p + "ffn_gate.weight", {c.n_embd, c.n_ff}));
    RETURN_IF_ERROR(CheckShape(file, p + "ffn_up.weight", {c.n_embd, c.n_ff}));
    return CheckShape(file, p + "ffn_down.weight", {c.n_ff, c.n_embd});
  }
  const int64_t e = c.n_expert, ff = c.n_ff_exp;
  RETURN_IF_ERROR(CheckShape(file, p + "ffn_gate_inp.weight", {c.n_embd, e}));
  RETURN_IF_ERROR(
      CheckShape(file, p + "ffn_gate_exps.weight", {c.n_embd, ff, e}));
  RETURN_IF_ERROR(
      CheckShape(file, p + "ffn_up_exps.weight", {c.n_embd, ff, e}));
  RETURN_IF_ERROR(
      CheckShape(file, p + "ffn_down_exps.weight", {ff, c.n_embd, e}));
  if (c.n_ff_shexp > 0) {
    const int64_t sh = c.n_ff_shexp;
    RETURN_IF_ERROR(
        CheckShape(file, p + "ffn_gate_inp_shexp.weight", {c.n_embd}));
    RETURN_IF_ERROR(
        CheckShape(file, p + "ffn_gate_shexp.weight", {c.n_embd, sh}));
    RETURN_IF_ERROR(CheckShape(file, p + "ffn_up_shexp.weight", {c.n_embd, sh}));
    RETURN_IF_ERROR(
        CheckShape(file, p + "ffn_down_shexp.weight", {sh, c.n_embd}));
  }
  if (!c.moe_biases) return absl::OkStatus();
  RETURN_IF_ERROR(CheckShape(file, p + "ffn_gate_inp.bias", {e}));
  RETURN_IF_ERROR(CheckShape(file, p + "ffn_gate_exps.bias", {ff, e}));
  RETURN_IF_ERROR(CheckShape(file, p + "ffn_up_exps.bias", {ff, e}));
  return CheckShape(file, p + "ffn_down_exps.bias", {c.n_embd, e});
}

// A Gated DeltaNet layer's tensors (the hybrids).
absl::Status CheckDeltaNetTensors(const GgufFile& file, const ModelConfig& c,
                                  const std::string& p) {
  const int64_t nv = c.ssm_v_heads, inner = c.ssm_value_dim();
  RETURN_IF_ERROR(
      CheckShape(file, p + "attn_qkv.weight", {c.n_embd, c.ssm_conv_dim()}));
  RETURN_IF_ERROR(CheckShape(file, p + "attn_gate.weight", {c.n_embd, inner}));
  RETURN_IF_ERROR(CheckShape(file, p + "ssm_conv1d.weight",
                             {c.ssm_conv_kernel, c.ssm_conv_dim()}));
  RETURN_IF_ERROR(CheckShape(file, p + "ssm_a", {nv}));
  RETURN_IF_ERROR(CheckShape(file, p + "ssm_dt.bias", {nv}));
  if (c.ssm_fused_ba) {
    RETURN_IF_ERROR(CheckShape(file, p + "ssm_ba.weight", {c.n_embd, 2 * nv}));
  } else {
    RETURN_IF_ERROR(CheckShape(file, p + "ssm_beta.weight", {c.n_embd, nv}));
    RETURN_IF_ERROR(CheckShape(file, p + "ssm_alpha.weight", {c.n_embd, nv}));
  }
  RETURN_IF_ERROR(CheckShape(file, p + "ssm_norm.weight", {c.ssm_state_size}));
  return CheckShape(file, p + "ssm_out.weight", {inner, c.n_embd});
}

}  // namespace

int64_t ModelConfig::NumRecurrentLayers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < n_layers; ++l) n += IsRecurrentLayer(l) ? 1 : 0;
  return n;
}

int64_t ModelConfig::ParameterCount() const {
  const int64_t q_width = n_heads * head_dim;
  const int64_t kv_width = n_kv_heads * head_dim;
  int64_t per_layer = 2 * n_embd;                  // attn_norm, ffn_norm
  per_layer += n_embd * (q_width + 2 * kv_width);  // attn_q, attn_k, attn_v
  per_layer += q_width * n_embd;                   // attn_output
  if (is_moe()) {
    per_layer += n_expert * n_embd;                 // ffn_gate_inp
    per_layer += n_expert * 3 * n_embd * n_ff_exp;  // the experts
  } else {
    per_layer += 3 * n_embd * n_ff;  // ffn_gate, ffn_up, down
  }
  if (qkv_bias) per_layer += q_width + 2 * kv_width;
  if (qk_norm) per_layer += 2 * head_dim;
  if (post_norms) per_layer += 2 * n_embd;
  if (attn_output_bias) per_layer += n_embd;
  if (attn_sinks) per_layer += n_heads;
  if (moe_biases) per_layer += n_expert * (1 + 2 * n_ff_exp + n_embd);
  if (n_ff_shexp > 0) per_layer += n_embd + 3 * n_embd * n_ff_shexp;
  const int64_t recurrent = NumRecurrentLayers();
  // Attention layers' parts beyond the common ones: the gate rows of a
  // gated attn_q.
  const int64_t gate_rows = attn_output_gate ? q_width * n_embd : 0;
  // A DeltaNet layer's parts in place of the attention's (norms included).
  const int64_t nv = ssm_v_heads;
  const int64_t delta = n_embd * ssm_conv_dim() + n_embd * ssm_value_dim() +
                        2 * nv * n_embd + ssm_conv_kernel * ssm_conv_dim() +
                        2 * nv + ssm_state_size + ssm_value_dim() * n_embd;
  const int64_t attention = n_embd * (q_width + 2 * kv_width) +
                            q_width * n_embd + gate_rows +
                            (qk_norm ? 2 * head_dim : 0);
  per_layer += gate_rows;
  int64_t total = n_vocab * n_embd + n_layers * per_layer + n_embd +
                  recurrent * (delta - attention);
  if (!tied_output) total += n_vocab * n_embd;
  return total;
}

int64_t ModelConfig::ActiveParameterCount() const {
  const int64_t idle = n_expert - n_expert_used;
  const int64_t expert = 3 * n_embd * n_ff_exp +
                         (moe_biases ? 2 * n_ff_exp + n_embd : 0);
  return ParameterCount() - n_layers * idle * expert;
}

absl::string_view PoolingTypeName(PoolingType pooling) {
  switch (pooling) {
    case PoolingType::kNone:
      return "none";
    case PoolingType::kMean:
      return "mean";
    case PoolingType::kCls:
      return "cls";
    case PoolingType::kLast:
      return "last";
  }
  return "unknown";
}

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(const absl::string_view arch_name,
                   file.GetString("general.architecture"));
  const Architecture* arch = FindArchitecture(arch_name);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported architecture '", arch_name,
        "' (general.architecture); supported: ", SupportedArchitectures()));
  }
  const std::string a(arch_name);
  ModelConfig c;
  c.architecture = a;
  ASSIGN_OR_RETURN(
      const absl::string_view name,
      OrDefault<absl::string_view>(file.GetString("general.name"), ""));
  c.name = std::string(name);

  ASSIGN_OR_RETURN(c.n_layers, ReadDim(file, absl::StrCat(a, ".block_count"),
                                       kMaxLayers, std::nullopt));
  ASSIGN_OR_RETURN(c.n_embd, ReadDim(file, absl::StrCat(a, ".embedding_length"),
                                     kMaxWidth, std::nullopt));
  ASSIGN_OR_RETURN(
      c.n_ff, ReadDim(file, absl::StrCat(a, ".feed_forward_length"), kMaxFf,
                      std::nullopt));
  ASSIGN_OR_RETURN(c.context_length,
                   ReadDim(file, absl::StrCat(a, ".context_length"),
                           kMaxContext, std::nullopt));
  ASSIGN_OR_RETURN(c.n_vocab, ReadVocabSize(file, a));
  RETURN_IF_ERROR(ReadAttention(file, a, &c));

  c.rope_layout = arch->rope_layout;
  ASSIGN_OR_RETURN(
      c.rope_freq_base,
      ReadPositive(file, absl::StrCat(a, ".rope.freq_base"), 10000.0));
  RETURN_IF_ERROR(ReadRopeScaling(file, a, &c));
  ASSIGN_OR_RETURN(
      c.rms_norm_eps,
      ReadPositive(file, absl::StrCat(a, ".attention.layer_norm_rms_epsilon"),
                   1e-5));

  c.tied_output = file.FindTensor("output.weight") == nullptr;
  c.qkv_bias = arch->may_have_qkv_bias &&
               file.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = arch->qk_norm;
  ASSIGN_OR_RETURN(c.pooling, ReadPooling(file, a));
  if (arch->moe) RETURN_IF_ERROR(ReadExperts(file, a, &c));
  if (arch->read_keys != nullptr) RETURN_IF_ERROR(arch->read_keys(file, &c));
  if (arch->configure != nullptr) arch->configure(&c);
  return c;
}

absl::Status CheckModelTensors(const GgufFile& file,
                               const ModelConfig& config) {
  const ModelConfig& c = config;
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;

  // ggml order: shape[0] is the input (contiguous) dimension.
  RETURN_IF_ERROR(CheckShape(file, "token_embd.weight", {c.n_embd, c.n_vocab}));
  RETURN_IF_ERROR(CheckShape(file, "output_norm.weight", {c.n_embd}));
  if (!c.tied_output) {
    RETURN_IF_ERROR(CheckShape(file, "output.weight", {c.n_embd, c.n_vocab}));
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    RETURN_IF_ERROR(CheckShape(file, "rope_freqs.weight", {c.rope_dim / 2}));
  }
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    const std::string p = absl::StrCat("blk.", layer, ".");
    RETURN_IF_ERROR(CheckShape(file, p + "attn_norm.weight", {c.n_embd}));
    RETURN_IF_ERROR(
        CheckShape(file,
                   p + (c.ffn_norm_is_post_attention_norm
                            ? "post_attention_norm.weight"
                            : "ffn_norm.weight"),
                   {c.n_embd}));
    RETURN_IF_ERROR(CheckFfnTensors(file, c, p));
    if (c.IsRecurrentLayer(layer)) {
      RETURN_IF_ERROR(CheckDeltaNetTensors(file, c, p));
      continue;
    }
    const std::pair<const char*, std::vector<int64_t>> shapes[] = {
        {"attn_q.weight",
         {c.n_embd, q_width * (c.attn_output_gate ? 2 : 1)}},
        {"attn_k.weight", {c.n_embd, kv_width}},
        {"attn_v.weight", {c.n_embd, kv_width}},
        {"attn_output.weight", {q_width, c.n_embd}},
    };
    for (const auto& [suffix, shape] : shapes) {
      RETURN_IF_ERROR(CheckShape(file, absl::StrCat(p, suffix), shape));
    }
    if (c.qkv_bias) {
      RETURN_IF_ERROR(CheckShape(file, p + "attn_q.bias", {q_width}));
      RETURN_IF_ERROR(CheckShape(file, p + "attn_k.bias", {kv_width}));
      RETURN_IF_ERROR(CheckShape(file, p + "attn_v.bias", {kv_width}));
    }
    if (c.qk_norm) {
      RETURN_IF_ERROR(CheckShape(file, p + "attn_q_norm.weight", {c.head_dim}));
      RETURN_IF_ERROR(CheckShape(file, p + "attn_k_norm.weight", {c.head_dim}));
    }
    if (c.attn_output_bias) {
      RETURN_IF_ERROR(CheckShape(file, p + "attn_output.bias", {c.n_embd}));
    }
    if (c.attn_sinks) {
      RETURN_IF_ERROR(CheckShape(file, p + "attn_sinks.weight", {c.n_heads}));
    }
    if (c.post_norms) {
      RETURN_IF_ERROR(
          CheckShape(file, p + "post_attention_norm.weight", {c.n_embd}));
      RETURN_IF_ERROR(CheckShape(file, p + "post_ffw_norm.weight", {c.n_embd}));
    }
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine
