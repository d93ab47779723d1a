// qwen35moe (Qwen3.5-MoE): qwen35's layers (arch/hybrid.cc) with a mixture
// of experts (softmax, top-k, renormalised) plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp · x).
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {

const Architecture kQwen35Moe = {
    .name = "qwen35moe",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = true,
    .layer = &HybridLayer,
    .read_keys = &ReadHybridKeys,
    .configure = &ConfigureHybrid,
};

}  // namespace paceline::engine::arch
