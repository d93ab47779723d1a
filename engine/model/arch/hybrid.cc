// What the hybrid linear-attention architectures share (qwen35,
// qwen35moe, qwen3next): their layer, and the keys of their Gated DeltaNet
// layers. As llama.cpp reads and builds them (src/models/qwen35.cpp,
// qwen35moe.cpp, qwen3next.cpp, delta-net-base.cpp): every
// full_attention_interval-th layer is gated full attention, the others
// Gated DeltaNet; the FFN's input norm is the tensor post_attention_norm.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/arch/architectures.h"
#include "engine/model/gguf_keys.h"

namespace paceline::engine::arch {
namespace {

// `<arch>.rope.dimension_sections` (M-RoPE): with text positions every
// section turns by the token's position, which is plain NeoX RoPE, as
// long as every rotated pair falls in the first three sections (the
// fourth is the vision encoder's extra position, 0 for text). llama.cpp's
// interleaved assignment: pair i's sector s = i % (sum of the sections) is
// section s % 3 while s < 3 × that section's size.
absl::Status CheckRopeSections(const GgufFile& file, const ModelConfig& c) {
  const std::string key = absl::StrCat(c.architecture, ".rope.dimension_sections");
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return absl::OkStatus();
  std::vector<int64_t> s;
  if (v->type == GgufValueType::kArray) {
    for (const GgufValue& e : v->elements) {
      switch (e.type) {
        case GgufValueType::kInt8:
        case GgufValueType::kInt16:
        case GgufValueType::kInt32:
        case GgufValueType::kInt64:
          s.push_back(e.i);
          break;
        case GgufValueType::kUint8:
        case GgufValueType::kUint16:
        case GgufValueType::kUint32:
        case GgufValueType::kUint64:
          s.push_back(static_cast<int64_t>(e.u & 0x7fffffff));
          break;
        default:
          break;  // counted short below
      }
    }
  }
  const auto refuse = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat("metadata key '", key, "': ",
                                                 why));
  };
  if (s.size() != 4 || v->elements.size() != 4) {
    return refuse("want an array of 4 integers");
  }
  const int64_t sum = s[0] + s[1] + s[2] + s[3];
  if (sum <= 0 || s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0) {
    return refuse("want non-negative sections with a positive sum");
  }
  for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
    const int64_t sector = i % sum;
    if (sector < 3 * s[sector % 3]) continue;
    return refuse(absl::StrCat(
        "rotated pair ", i,
        " falls in the fourth (vision) section, which text positions do not "
        "turn; not implemented"));
  }
  return absl::OkStatus();
}

}  // namespace

LayerProgram HybridLayer(const ModelConfig& c, int64_t layer) {
  LayerProgram p;
  p.ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kAttnNorm));
  if (c.IsRecurrentLayer(layer)) {
    p.ops.push_back(ops::DeltaNet(Buf::kH, Buf::kProj));
    p.ops.push_back(ops::Add(Buf::kProj, Buf::kX));
  } else {
    Op qkv = ops::QkvRope(Buf::kH, /*qkv_bias=*/false, /*qk_norm=*/true);
    qkv.output_gate = true;
    p.ops.push_back(qkv);
    Op attention = ops::Attention();
    attention.output_gate = true;
    p.ops.push_back(attention);
    p.ops.push_back(ops::MatMul(Buf::kAtt, Buf::kX, Weight::kAttnOutput,
                                /*accumulate=*/true));
  }
  AppendFeedForward(&p, c.is_moe());
  return p;
}

absl::Status ReadHybridKeys(const GgufFile& file, ModelConfig* c) {
  const auto key = [c](absl::string_view k) {
    return absl::StrCat(c->architecture, ".", k);
  };
  constexpr int64_t kMax = int64_t{1} << 16;
  // llama.cpp's default interval when the key is absent: 4.
  ASSIGN_OR_RETURN(c->full_attention_interval,
                   ReadDim(file, key("full_attention_interval"), kMax, 4));
  ASSIGN_OR_RETURN(c->ssm_conv_kernel,
                   ReadDim(file, key("ssm.conv_kernel"), 64, std::nullopt));
  ASSIGN_OR_RETURN(c->ssm_state_size,
                   ReadDim(file, key("ssm.state_size"), 1024, std::nullopt));
  ASSIGN_OR_RETURN(c->ssm_k_heads,
                   ReadDim(file, key("ssm.group_count"), kMax, std::nullopt));
  ASSIGN_OR_RETURN(c->ssm_v_heads, ReadDim(file, key("ssm.time_step_rank"),
                                           kMax, std::nullopt));
  ASSIGN_OR_RETURN(const int64_t inner,
                   ReadDim(file, key("ssm.inner_size"), int64_t{1} << 24,
                           c->ssm_value_dim()));
  if (inner != c->ssm_value_dim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key("ssm.inner_size"), "' is ", inner, "; want ",
        key("ssm.time_step_rank"), " x ", key("ssm.state_size"), " = ",
        c->ssm_value_dim()));
  }
  if (c->ssm_v_heads % c->ssm_k_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key("ssm.group_count"), "' is ", c->ssm_k_heads,
        ", which does not divide ", key("ssm.time_step_rank"), " = ",
        c->ssm_v_heads));
  }
  if (file.Has(key("attention.recurrent_layers"))) {
    return absl::UnimplementedError(absl::StrCat(
        "metadata key '", key("attention.recurrent_layers"),
        "': a per-layer pattern is not implemented (only ",
        key("full_attention_interval"), ")"));
  }
  RETURN_IF_ERROR(CheckRopeSections(file, *c));
  if (c->is_moe()) {
    ASSIGN_OR_RETURN(c->n_ff_shexp,
                     ReadDim(file, key("expert_shared_feed_forward_length"),
                             int64_t{1} << 22, c->n_ff));
  }
  return absl::OkStatus();
}

void ConfigureHybrid(ModelConfig* c) {
  c->ffn_norm_is_post_attention_norm = true;
  c->attn_output_gate = true;
}

}  // namespace paceline::engine::arch
