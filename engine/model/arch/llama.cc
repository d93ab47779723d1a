// llama (and the Mistral files that call themselves llama): pre-norm
// attention with RoPE over adjacent pairs (Q/K/V biases where the file has
// them: some conversions do, and ignoring them would compute the wrong
// thing), a SwiGLU feed-forward.
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {
namespace {

LayerProgram Layer(const ModelConfig& config, int64_t) {
  LayerProgram p;
  AppendAttention(&p, /*qkv_bias=*/config.qkv_bias, /*qk_norm=*/false);
  AppendFeedForward(&p, /*moe=*/false);
  return p;
}

}  // namespace

const Architecture kLlama = {
    .name = "llama",
    .rope_layout = RopeLayout::kAdjacentPairs,
    .qk_norm = false,
    .may_have_qkv_bias = true,
    .moe = false,
    .layer = &Layer,
};

}  // namespace paceline::engine::arch
