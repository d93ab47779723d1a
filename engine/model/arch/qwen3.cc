// qwen3: qwen2's layer without the biases, with a per-head RMSNorm on Q
// and K before RoPE.
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {
namespace {

LayerProgram Layer(const ModelConfig&, int64_t) {
  LayerProgram p;
  AppendAttention(&p, /*qkv_bias=*/false, /*qk_norm=*/true);
  AppendFeedForward(&p, /*moe=*/false);
  return p;
}

}  // namespace

const Architecture kQwen3 = {
    .name = "qwen3",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = false,
    .layer = &Layer,
};

}  // namespace paceline::engine::arch
