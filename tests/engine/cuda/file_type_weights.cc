#include "tests/engine/cuda/file_type_weights.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model_loader.h"

namespace paceline::engine::cuda::testing {
namespace {

// What the retyped views point into.
struct Holder {
  std::shared_ptr<const ModelWeights> loaded;
  std::unique_ptr<GgufFile> file;
  std::vector<std::vector<float>> widened;
};

// `view` as matrix `index` of the `count` stacked in tensor `name` (a MoE
// layer's experts; 0 of 1 for a plain matrix).
absl::Status Retype(const GgufFile& file, const std::string& name,
                    ViewTypes types, Holder* holder, WeightView* view,
                    RetypedWeights* out, int64_t index = 0, int64_t count = 1) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) return absl::OkStatus();  // e.g. a MoE layer's FFN
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(t->type);
  const size_t row_bytes = view->cols / traits.block_size * traits.type_size;
  const size_t bytes = row_bytes * view->rows;
  if (t->size_bytes != bytes * count) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": bad size"));
  }
  const uint8_t* data = t->data + index * bytes;
  out->file_matrix_bytes += bytes;
  if (types == ViewTypes::kFileTypes && view->type == t->type) {
    return absl::OkStatus();  // kept as the file has it
  }
  WeightView v = *view;
  v.layout = WeightLayout::kRows;
  if (types == ViewTypes::kFileTypes) {
    v.type = t->type;
    v.data = data;
    v.row_bytes = row_bytes;
  } else {
    std::vector<float>& f = holder->widened.emplace_back(
        static_cast<size_t>(view->rows * view->cols));
    for (int64_t r = 0; r < view->rows; ++r) {
      RETURN_IF_ERROR(DequantizeRow(t->type, data + r * row_bytes,
                                    f.data() + r * view->cols, view->cols));
    }
    v.type = GgmlType::kF32;
    v.data = f.data();
    v.row_bytes = view->cols * sizeof(float);
  }
  if (v.type != view->type) ++out->retyped;
  *view = v;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RetypedWeights> LoadRetyped(const std::string& path,
                                           ViewTypes types) {
  auto holder = std::make_shared<Holder>();
  RetypedWeights out;
  ASSIGN_OR_RETURN(LoadedModel model, OpenModel(path));
  holder->loaded = model.weights;
  ASSIGN_OR_RETURN(holder->file, GgufFile::Open(path));
  // The loaded weights are never shared past this point, and were not
  // created const: their views may be rewritten.
  auto* w = const_cast<ModelWeights*>(holder->loaded.get());
  auto& layers = const_cast<std::vector<LayerWeights>&>(w->layers());
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerWeights& l = layers[i];
    const std::pair<const char*, WeightView*> matrices[] = {
        {"attn_q", &l.attn_q},
        {"attn_k", &l.attn_k},
        {"attn_v", &l.attn_v},
        {"attn_output", &l.attn_output},
        {"ffn_gate", &l.ffn_gate},
        {"ffn_up", &l.ffn_up},
        {"ffn_down", &l.ffn_down},
        // The hybrids' DeltaNet layers and shared experts.
        {"attn_qkv", &l.ssm_qkv},
        {"attn_gate", &l.ssm_z},
        {"ssm_beta", &l.ssm_beta},
        {"ssm_alpha", &l.ssm_alpha},
        {"ssm_ba", &l.ssm_ba},
        {"ssm_out", &l.ssm_out},
        {"ffn_gate_shexp", &l.ffn_gate_shexp},
        {"ffn_up_shexp", &l.ffn_up_shexp},
        {"ffn_down_shexp", &l.ffn_down_shexp}};
    for (const auto& [suffix, view] : matrices) {
      RETURN_IF_ERROR(Retype(*holder->file,
                             absl::StrCat("blk.", i, ".", suffix, ".weight"),
                             types, holder.get(), view, &out));
    }
    // Experts stacked in one tensor each: widened, or kept as the file's
    // (their bytes not counted: a step reads only the chosen ones).
    if (types != ViewTypes::kF32) continue;
    const int64_t n = static_cast<int64_t>(l.experts.size());
    for (int64_t e = 0; e < n; ++e) {
      ExpertWeights& x = l.experts[e];
      const std::pair<const char*, WeightView*> experts[] = {
          {"ffn_gate_exps", &x.gate},
          {"ffn_up_exps", &x.up},
          {"ffn_down_exps", &x.down}};
      for (const auto& [suffix, view] : experts) {
        RetypedWeights ignored;
        RETURN_IF_ERROR(Retype(*holder->file,
                               absl::StrCat("blk.", i, ".", suffix, ".weight"),
                               types, holder.get(), view, &ignored, e, n));
        out.retyped += ignored.retyped;
      }
    }
  }
  if (holder->file->FindTensor("output.weight") != nullptr) {
    RETURN_IF_ERROR(Retype(*holder->file, "output.weight", types, holder.get(),
                           const_cast<WeightView*>(&w->output()), &out));
  }
  out.weights = std::shared_ptr<const ModelWeights>(holder, w);
  return out;
}

}  // namespace paceline::engine::cuda::testing
