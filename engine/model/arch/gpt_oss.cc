// gpt-oss: sliding-window layers alternating with full ones (both with the
// file's YaRN RoPE), attention sinks, biases on Q/K/V and the attention
// output, and a mixture of experts whose router and experts have biases
// and whose experts gate with a clamped SwiGLU (ops.h's SwigluOai). The
// keys and graph as llama.cpp reads and builds them
// (src/models/openai-moe.cpp): the FFN's input norm is the tensor named
// post_attention_norm.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/arch/architectures.h"
#include "engine/model/gguf_keys.h"

namespace paceline::engine::arch {
namespace {

LayerProgram Layer(const ModelConfig& c, int64_t layer) {
  LayerProgram p;
  p.ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kAttnNorm));
  p.ops.push_back(ops::QkvRope(Buf::kH, /*qkv_bias=*/true, /*qk_norm=*/false));
  Op attention = ops::Attention();
  attention.window = c.IsSlidingLayer(layer) ? c.sliding_window : 0;
  attention.sinks = true;
  p.ops.push_back(attention);
  Op out = ops::MatMul(Buf::kAtt, Buf::kX, Weight::kAttnOutput,
                       /*accumulate=*/true);
  out.bias = true;
  p.ops.push_back(out);
  AppendFeedForward(&p, /*moe=*/true);
  p.ops.back().activation = FfnActivation::kSwigluOai;
  return p;
}

absl::Status ReadKeys(const GgufFile& file, ModelConfig* c) {
  const std::string& a = c->architecture;
  // llama.cpp's default period when the key is absent (convert_hf_to_gguf
  // writes none for gpt-oss): 2, a sliding layer then a full one.
  RETURN_IF_ERROR(ReadSlidingWindow(file, /*default_period=*/2, c));
  // Both kinds of layer rope alike; a file giving the sliding layers their
  // own base asks for something this engine's sliding RoPE (unscaled,
  // gemma3's) does not compute.
  const std::string swa_base = absl::StrCat(a, ".rope.freq_base_swa");
  ASSIGN_OR_RETURN(const double base,
                   OrDefault(file.GetFloat(swa_base), c->rope_freq_base));
  if (base != c->rope_freq_base) {
    return absl::UnimplementedError(absl::StrCat(
        "metadata key '", swa_base, "' is ", base, ", unlike ", a,
        ".rope.freq_base (", c->rope_freq_base,
        "): a separate RoPE for gpt-oss's sliding layers is not implemented"));
  }
  return absl::OkStatus();
}

void Configure(ModelConfig* c) {
  c->qkv_bias = true;
  c->attn_output_bias = true;
  c->attn_sinks = true;
  c->moe_biases = true;
  c->ffn_norm_is_post_attention_norm = true;
  c->ffn_activation = FfnActivation::kSwigluOai;
}

}  // namespace

const Architecture kGptOss = {
    .name = "gpt-oss",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = false,
    .may_have_qkv_bias = true,
    .moe = true,
    .layer = &Layer,
    .read_keys = &ReadKeys,
    .configure = &Configure,
};

}  // namespace paceline::engine::arch
