// qwen2: llama's layer with RoPE over halves and biases on Q, K and V.
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

const Architecture kQwen2 = {
    .name = "qwen2",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = false,
    .may_have_qkv_bias = true,
    .moe = false,
    .layer = &Layer,
};

}  // namespace paceline::engine::arch
