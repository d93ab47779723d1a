#include "engine/model/arch/architectures.h"

namespace paceline::engine::arch {

const std::vector<const Architecture*>& All() {
  static const std::vector<const Architecture*>* all =
      new std::vector<const Architecture*>{&kLlama, &kQwen2, &kQwen3,
                                           &kQwen3Moe, &kGemma3, &kGptOss};
  return *all;
}

void AppendAttention(LayerProgram* p, bool qkv_bias, bool qk_norm) {
  p->ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kAttnNorm));
  p->ops.push_back(ops::QkvRope(Buf::kH, qkv_bias, qk_norm));
  p->ops.push_back(ops::Attention());
  p->ops.push_back(ops::MatMul(Buf::kAtt, Buf::kX, Weight::kAttnOutput,
                               /*accumulate=*/true));
}

void AppendFeedForward(LayerProgram* p, bool moe) {
  p->ops.push_back(ops::RmsNorm(Buf::kX, Buf::kH, Weight::kFfnNorm));
  p->ops.push_back(
      ops::FeedForward(Buf::kH, Buf::kX, moe, /*accumulate=*/true));
}

}  // namespace paceline::engine::arch
