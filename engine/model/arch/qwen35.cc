// qwen35 (Qwen3.5, dense): Gated DeltaNet layers with a gated full
// attention layer every full_attention_interval-th (arch/hybrid.cc), a
// SwiGLU FFN after each. Value heads read key heads tiled (h % key heads).
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {

const Architecture kQwen35 = {
    .name = "qwen35",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = false,
    .layer = &HybridLayer,
    .read_keys = &ReadHybridKeys,
    .configure = &ConfigureHybrid,
};

}  // namespace paceline::engine::arch
