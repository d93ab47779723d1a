#include "engine/model/arch/architectures.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/model/gguf_keys.h"

namespace paceline::engine::arch {

const std::vector<const Architecture*>& All() {
  static const std::vector<const Architecture*>* all =
      new std::vector<const Architecture*>{
          &kLlama,  &kQwen2,  &kQwen3,  &kQwen3Moe,  &kGemma3,
          &kGptOss, &kQwen35, &kQwen35Moe, &kQwen3Next};
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

absl::Status ReadSlidingWindow(const GgufFile& file, int64_t default_period,
                               ModelConfig* c) {
  const std::string& a = c->architecture;
  ASSIGN_OR_RETURN(c->sliding_window,
                   ReadDim(file, absl::StrCat(a, ".attention.sliding_window"),
                           int64_t{1} << 30, 0));
  if (c->sliding_window == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      c->swa_period,
      ReadDim(file, absl::StrCat(a, ".attention.sliding_window_pattern"),
              int64_t{1} << 12, default_period));
  return absl::OkStatus();
}

}  // namespace paceline::engine::arch
