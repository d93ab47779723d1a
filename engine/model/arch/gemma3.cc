// gemma3: pre- and post-norms around attention and the feed-forward, Q/K
// RMSNorm, sliding-window layers interleaved with global ones (each kind
// with its own RoPE base; the file's RoPE scaling on the global layers
// only), the input embedding times sqrt(n_embd), a GELU(tanh)-gated
// feed-forward, a tied output head. The keys and graph as llama.cpp reads
// and builds them (src/models/gemma3.cpp).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/arch/architectures.h"
#include "engine/model/gguf_keys.h"

namespace paceline::engine::arch {
namespace {

LayerProgram Layer(const ModelConfig& c, int64_t layer) {
  const bool sliding = c.IsSlidingLayer(layer);
  LayerProgram p;
  p.ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kAttnNorm));
  Op qkv = ops::QkvRope(Buf::kH, /*qkv_bias=*/false, /*qk_norm=*/true);
  qkv.local_rope = sliding && c.sliding_rope;
  p.ops.push_back(qkv);
  Op attention = ops::Attention();
  attention.window = sliding ? c.sliding_window : 0;
  p.ops.push_back(attention);
  p.ops.push_back(ops::MatMul(Buf::kAtt, Buf::kProj, Weight::kAttnOutput,
                              /*accumulate=*/false));
  p.ops.push_back(ops::RmsNorm(Buf::kProj, Buf::kProj, Weight::kPostAttnNorm));
  p.ops.push_back(ops::Add(Buf::kProj, Buf::kX));
  p.ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kFfnNorm));
  Op ffn = ops::FeedForward(Buf::kH, Buf::kProj, /*moe=*/false,
                            /*accumulate=*/false);
  ffn.activation = FfnActivation::kGeluTanh;
  p.ops.push_back(ffn);
  p.ops.push_back(ops::RmsNorm(Buf::kProj, Buf::kProj, Weight::kPostFfnNorm));
  p.ops.push_back(ops::Add(Buf::kProj, Buf::kX));
  return p;
}

absl::Status ReadKeys(const GgufFile& file, ModelConfig* c) {
  const std::string& a = c->architecture;
  // llama.cpp's default period when the key is absent: 6 (5 sliding
  // layers, then a global one).
  RETURN_IF_ERROR(ReadSlidingWindow(file, /*default_period=*/6, c));
  if (c->sliding_window > 0) {
    ASSIGN_OR_RETURN(
        c->rope_freq_base_swa,
        ReadPositive(file, absl::StrCat(a, ".rope.freq_base_swa"), 10000.0));
  }
  const std::string softcap = absl::StrCat(a, ".final_logit_softcapping");
  ASSIGN_OR_RETURN(const double cap, OrDefault(file.GetFloat(softcap), 0.0));
  if (cap != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "metadata key '", softcap, "' is ", cap,
        ": final logit soft-capping is not implemented (Gemma 3 has none)"));
  }
  return absl::OkStatus();
}

void Configure(ModelConfig* c) {
  c->sliding_rope = c->sliding_window > 0;
  c->embed_scale = std::sqrt(static_cast<double>(c->n_embd));
  c->post_norms = true;
  c->ffn_activation = FfnActivation::kGeluTanh;
  // Gemma 3 27B (62 layers) scales by its n_embd / n_heads, the others by
  // their head size (llama.cpp, after gemma_pytorch's config).
  const double d = c->n_layers == 62
                       ? static_cast<double>(c->n_embd / c->n_heads)
                       : static_cast<double>(c->head_dim);
  c->attention_scale = 1.0 / std::sqrt(d);
}

}  // namespace

const Architecture kGemma3 = {
    .name = "gemma3",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = false,
    .layer = &Layer,
    .read_keys = &ReadKeys,
    .configure = &Configure,
};

}  // namespace paceline::engine::arch
