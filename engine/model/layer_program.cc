#include "engine/model/layer_program.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/arch/architectures.h"

namespace paceline::engine {

const Architecture* FindArchitecture(absl::string_view name) {
  for (const Architecture* a : arch::All()) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::vector<absl::string_view> names;
  for (const Architecture* a : arch::All()) names.push_back(a->name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::vector<LayerProgram>> LayerPrograms(
    const ModelConfig& config) {
  const Architecture* a = FindArchitecture(config.architecture);
  if (a == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no layer description for architecture '", config.architecture, "'"));
  }
  std::vector<LayerProgram> out;
  out.reserve(static_cast<size_t>(config.n_layers));
  for (int64_t l = 0; l < config.n_layers; ++l) {
    out.push_back(a->layer(config, l));
  }
  return out;
}

namespace ops {

Op RmsNorm(Buf src, Buf dst, Weight weight) {
  Op op;
  op.kind = OpKind::kRmsNorm;
  op.src = src;
  op.dst = dst;
  op.weight = weight;
  return op;
}

Op QkvRope(Buf src, bool qkv_bias, bool qk_norm) {
  Op op;
  op.kind = OpKind::kQkvRope;
  op.src = src;
  op.qkv_bias = qkv_bias;
  op.qk_norm = qk_norm;
  return op;
}

Op Attention() {
  Op op;
  op.kind = OpKind::kAttention;
  op.dst = Buf::kAtt;
  return op;
}

Op MatMul(Buf src, Buf dst, Weight weight, bool accumulate) {
  Op op;
  op.kind = OpKind::kMatMul;
  op.src = src;
  op.dst = dst;
  op.weight = weight;
  op.accumulate = accumulate;
  return op;
}

Op Add(Buf src, Buf dst) {
  Op op;
  op.kind = OpKind::kAdd;
  op.src = src;
  op.dst = dst;
  return op;
}

Op FeedForward(Buf src, Buf dst, bool moe, bool accumulate) {
  Op op;
  op.kind = OpKind::kFeedForward;
  op.src = src;
  op.dst = dst;
  op.moe = moe;
  op.accumulate = accumulate;
  return op;
}

Op DeltaNet(Buf src, Buf dst) {
  Op op;
  op.kind = OpKind::kDeltaNet;
  op.src = src;
  op.dst = dst;
  return op;
}

}  // namespace ops
}  // namespace paceline::engine
