#include "engine/model/weight_recipe.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace paceline::engine {
namespace {

struct NamedRecipe {
  absl::string_view name;
  WeightMix mix;
  GgmlType type;  // the uniform type, or the mix's base
};

// Uniform types first, then the mixes; most bits first within each.
constexpr NamedRecipe kRecipes[] = {
    {"f32", WeightMix::kUniform, GgmlType::kF32},
    {"f16", WeightMix::kUniform, GgmlType::kF16},
    {"bf16", WeightMix::kUniform, GgmlType::kBF16},
    {"q8_0", WeightMix::kUniform, GgmlType::kQ8_0},
    {"q6_k", WeightMix::kUniform, GgmlType::kQ6_K},
    {"q5_k", WeightMix::kUniform, GgmlType::kQ5_K},
    {"q4_k", WeightMix::kUniform, GgmlType::kQ4_K},
    {"q4_0", WeightMix::kUniform, GgmlType::kQ4_0},
    {"q3_k", WeightMix::kUniform, GgmlType::kQ3_K},
    {"q5_k_m", WeightMix::kQ5_K_M, GgmlType::kQ5_K},
    {"q4_k_m", WeightMix::kQ4_K_M, GgmlType::kQ4_K},
    {"q3_k_m", WeightMix::kQ3_K_M, GgmlType::kQ3_K},
    {"q2_k", WeightMix::kQ2_K, GgmlType::kQ2_K},
    {"mxfp4_moe", WeightMix::kMxfp4Moe, GgmlType::kMXFP4},
};

// llama.cpp's tensor_type_fallback: a type whose block does not divide the
// width is replaced, and F16 is the last resort.
GgmlType Fallback(GgmlType type, int64_t cols) {
  if (cols % GetGgmlTypeTraits(type).block_size == 0) return type;
  GgmlType next = GgmlType::kF16;
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      next = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      next = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      next = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      next = GgmlType::kQ8_0;
      break;
    default:
      break;
  }
  return cols % GetGgmlTypeTraits(next).block_size == 0 ? next : GgmlType::kF16;
}

}  // namespace

std::vector<ModelMatrix> ModelMatrices(const ModelConfig& c) {
  const int64_t q_dim = c.n_heads * c.head_dim;
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<ModelMatrix> out;
  out.push_back({MatrixRole::kTokenEmbd, -1, c.n_vocab, c.n_embd});
  if (!c.tied_output) {
    out.push_back({MatrixRole::kOutput, -1, c.n_vocab, c.n_embd});
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (c.IsRecurrentLayer(i)) {
      const int64_t nv = c.ssm_v_heads;
      out.push_back({MatrixRole::kSsmQkv, i, c.ssm_conv_dim(), c.n_embd});
      out.push_back({MatrixRole::kSsmGate, i, c.ssm_value_dim(), c.n_embd});
      if (c.ssm_fused_ba) {
        out.push_back({MatrixRole::kSsmBeta, i, 2 * nv, c.n_embd});
      } else {
        out.push_back({MatrixRole::kSsmBeta, i, nv, c.n_embd});
        out.push_back({MatrixRole::kSsmAlpha, i, nv, c.n_embd});
      }
      out.push_back({MatrixRole::kSsmOut, i, c.n_embd, c.ssm_value_dim()});
    } else {
      out.push_back({MatrixRole::kAttnQ, i,
                     q_dim * (c.attn_output_gate ? 2 : 1), c.n_embd});
      out.push_back({MatrixRole::kAttnK, i, kv_dim, c.n_embd});
      out.push_back({MatrixRole::kAttnV, i, kv_dim, c.n_embd});
      out.push_back({MatrixRole::kAttnOutput, i, c.n_embd, q_dim});
    }
    if (c.is_moe()) {  // every expert's matrix stacked, as in the file
      const int64_t stacked = c.n_expert * c.n_ff_exp;
      out.push_back({MatrixRole::kFfnGate, i, stacked, c.n_embd});
      out.push_back({MatrixRole::kFfnUp, i, stacked, c.n_embd});
      out.push_back(
          {MatrixRole::kFfnDown, i, c.n_expert * c.n_embd, c.n_ff_exp});
      if (c.n_ff_shexp > 0) {
        out.push_back({MatrixRole::kFfnGateShexp, i, c.n_ff_shexp, c.n_embd});
        out.push_back({MatrixRole::kFfnUpShexp, i, c.n_ff_shexp, c.n_embd});
        out.push_back({MatrixRole::kFfnDownShexp, i, c.n_embd, c.n_ff_shexp});
      }
      continue;
    }
    out.push_back({MatrixRole::kFfnGate, i, c.n_ff, c.n_embd});
    out.push_back({MatrixRole::kFfnUp, i, c.n_ff, c.n_embd});
    out.push_back({MatrixRole::kFfnDown, i, c.n_embd, c.n_ff});
  }
  return out;
}

bool UsesMoreBits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 ||
         (layer - n_layers / 8) % 3 == 2;
}

WeightRecipe WeightRecipe::Mix(WeightMix mix) {
  for (const NamedRecipe& r : kRecipes) {
    if (r.mix == mix) return WeightRecipe(mix, r.type);
  }
  return Uniform(GgmlType::kF16);  // unreachable: every mix is in kRecipes
}

std::string WeightRecipe::name() const {
  for (const NamedRecipe& r : kRecipes) {
    if (r.mix == mix_ && r.type == base_) return std::string(r.name);
  }
  // A uniform type without a name of its own (q2_k names the mix).
  return absl::StrCat(absl::AsciiStrToLower(GetGgmlTypeTraits(base_).name),
                      " (uniform)");
}

GgmlType WeightRecipe::TypeOf(const ModelConfig& config,
                              const ModelMatrix& m) const {
  if (mix_ == WeightMix::kUniform) return base_;
  return MixedType(config, m);
}

GgmlType WeightRecipe::MixedType(const ModelConfig& c,
                                 const ModelMatrix& m) const {
  if (mix_ == WeightMix::kMxfp4Moe) {
    const bool expert =
        c.is_moe() && m.layer >= 0 &&
        (m.role == MatrixRole::kFfnGate || m.role == MatrixRole::kFfnUp ||
         m.role == MatrixRole::kFfnDown);
    return expert ? GgmlType::kMXFP4 : GgmlType::kQ8_0;
  }
  const bool head = m.role == MatrixRole::kOutput ||
                    (c.tied_output && m.role == MatrixRole::kTokenEmbd);
  if (head) {
    // llama.cpp checks the base type's block, which is 256 for every mix.
    return m.cols % 256 == 0 ? GgmlType::kQ6_K : GgmlType::kQ8_0;
  }
  const int64_t n = c.n_layers;
  const bool more = UsesMoreBits(m.layer, n);
  GgmlType t = base_;
  switch (m.role) {
    case MatrixRole::kAttnV:
    case MatrixRole::kSsmQkv:
      if (mix_ == WeightMix::kQ2_K) {
        const bool gqa4 = c.n_kv_heads > 0 && c.n_heads / c.n_kv_heads >= 4;
        t = gqa4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
      } else if (mix_ == WeightMix::kQ3_K_M) {
        t = m.layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      } else if (more) {
        t = GgmlType::kQ6_K;
      }
      break;
    case MatrixRole::kFfnDown:
    case MatrixRole::kFfnDownShexp:
      if (mix_ == WeightMix::kQ2_K) {
        t = GgmlType::kQ3_K;
      } else if (mix_ == WeightMix::kQ3_K_M) {
        t = m.layer < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
      } else if (more) {
        t = GgmlType::kQ6_K;
      }
      break;
    case MatrixRole::kAttnOutput:
      if (mix_ == WeightMix::kQ2_K) t = GgmlType::kQ3_K;
      if (mix_ == WeightMix::kQ3_K_M) t = GgmlType::kQ4_K;
      break;
    default:
      break;
  }
  return Fallback(t, m.cols);
}

absl::StatusOr<WeightRecipe> ParseWeightsDtype(absl::string_view name) {
  for (const NamedRecipe& r : kRecipes) {
    if (r.name != name) continue;
    return r.mix == WeightMix::kUniform ? WeightRecipe::Uniform(r.type)
                                        : WeightRecipe::Mix(r.mix);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weights dtype '", name,
                   "' (accepted: ", WeightsDtypeNames(), ")"));
}

std::string WeightsDtypeNames() {
  std::string names;
  for (const NamedRecipe& r : kRecipes) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", r.name);
  }
  return names;
}

}  // namespace paceline::engine
