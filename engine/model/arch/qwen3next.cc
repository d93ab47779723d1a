// qwen3next (Qwen3-Next, Qwen3-Coder-Next): as qwen35moe (arch/hybrid.cc),
// but value heads read key heads grouped (h / (value heads / key heads)),
// beta and alpha come from one projection laid out per key head
// (blk.N.ssm_ba), and RoPE is plain NeoX (no sections key).
#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {
namespace {

void Configure(ModelConfig* c) {
  ConfigureHybrid(c);
  c->ssm_grouped_heads = true;
  c->ssm_fused_ba = true;
}

}  // namespace

const Architecture kQwen3Next = {
    .name = "qwen3next",
    .rope_layout = RopeLayout::kNeoxHalves,
    .qk_norm = true,
    .may_have_qkv_bias = false,
    .moe = true,
    .layer = &HybridLayer,
    .read_keys = &ReadHybridKeys,
    .configure = &Configure,
};

}  // namespace paceline::engine::arch
