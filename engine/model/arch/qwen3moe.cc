// qwen3moe: qwen3's attention, then a mixture of experts (a softmax router
// picks the top n_expert_used SwiGLU experts, their weights renormalised;
// cpu/moe_ffn.h).
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {
namespace {

LayerProgram Layer(const ModelConfig&, int64_t) {
  LayerProgram p;
  AppendAttention(&p, /*qkv_bias=*/false, /*qk_norm=*/true);
  AppendFeedForward(&p, /*moe=*/true);
  return p;
}

}  // namespace

const Architecture kQwen3Moe = {
    .name = "qwen3moe",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = true,
    .layer = &Layer,
};

}  // namespace paceline::engine::arch
