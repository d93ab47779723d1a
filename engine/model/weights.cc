#include "engine/model/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/gguf/quantize.h"
#include "engine/model/model_inventory.h"
#include "engine/model/rope_table.h"

namespace paceline::engine {

// An aligned byte buffer the weights own (converted or generated data).
struct ModelWeights::Buffer {
  static constexpr std::align_val_t kAlign{64};
  explicit Buffer(size_t n)
      : data(static_cast<uint8_t*>(
            ::operator new(std::max<size_t>(n, 1), kAlign))) {}
  ~Buffer() { ::operator delete(data, kAlign); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data;
};

ModelWeights::~ModelWeights() = default;

uint8_t* ModelWeights::Allocate(size_t bytes) {
  buffers_.push_back(std::make_unique<Buffer>(bytes));
  return buffers_.back()->data;
}

absl::Status ModelWeights::Embed(int32_t id, float* out) const {
  const auto* row = static_cast<const uint8_t*>(token_embd_.data) +
                    static_cast<size_t>(id) * token_embd_.row_bytes;
  return DequantizeRow(token_embd_.type, row, out, token_embd_.cols);
}

namespace {

uint64_t ViewBytes(const WeightView& w) {
  return static_cast<uint64_t>(w.rows) * w.row_bytes;
}

// A layer's matrices without its routed experts (dense FFN, router, shared
// expert and DeltaNet projections included).
uint64_t SharedLayerBytes(const LayerWeights& l) {
  uint64_t bytes = 0;
  for (const WeightView* w :
       {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate,
        &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp, &l.ffn_gate_shexp,
        &l.ffn_up_shexp, &l.ffn_down_shexp, &l.ssm_qkv, &l.ssm_z, &l.ssm_beta,
        &l.ssm_alpha, &l.ssm_ba, &l.ssm_out}) {
    bytes += ViewBytes(*w);
  }
  return bytes;
}

}  // namespace

uint64_t ModelWeights::ExpertBytes(int64_t layer) const {
  const LayerWeights& l = layers_[layer];
  if (l.experts.empty()) return 0;
  const ExpertWeights& e = l.experts[0];  // every expert has the same types
  return ViewBytes(e.gate) + ViewBytes(e.up) + ViewBytes(e.down);
}

uint64_t ModelWeights::MatMulBytesPerToken() const {
  uint64_t total = ViewBytes(output_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const uint64_t used =
        std::min<uint64_t>(config_.n_expert_used, layers_[i].experts.size());
    total += SharedLayerBytes(layers_[i]) + used * ExpertBytes(i);
  }
  return total;
}

uint64_t ModelWeights::MatMulBytes() const {
  uint64_t total = ViewBytes(output_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    total += SharedLayerBytes(layers_[i]) +
             layers_[i].experts.size() * ExpertBytes(i);
  }
  return total;
}

namespace {

absl::Status CheckSupportedConfig(const ModelConfig& c) {
  if (c.n_layers <= 0 || c.n_embd <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.head_dim <= 0 || c.n_ff <= 0 || c.n_vocab <= 0 ||
      c.n_heads % c.n_kv_heads != 0 || c.rope_dim % 2 != 0 ||
      c.rope_dim > c.head_dim || c.rope_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model shape '", c.name, "' is inconsistent"));
  }
  if (c.is_moe() && (c.n_expert_used < 1 || c.n_expert_used > c.n_expert ||
                     c.n_ff_exp <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model shape '", c.name, "': ", c.n_expert_used, " of ", c.n_expert,
        " experts of width ", c.n_ff_exp, " is inconsistent"));
  }
  RETURN_IF_ERROR(CheckRopeConfig(c));
  if (c.NumRecurrentLayers() > 0 &&
      (c.ssm_conv_kernel < 1 || c.ssm_state_size < 1 ||
       c.ssm_state_size > 1024 || c.ssm_k_heads < 1 ||
       c.ssm_v_heads % c.ssm_k_heads != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model shape '", c.name, "': DeltaNet layers of ", c.ssm_k_heads,
        " key / ", c.ssm_v_heads, " value heads of ", c.ssm_state_size,
        ", convolution ", c.ssm_conv_kernel, " are inconsistent"));
  }
  if (c.head_dim > ModelWeights::kMaxHeadDim) {
    return absl::UnimplementedError(absl::StrCat("head size ", c.head_dim,
                                                 " is over the supported ",
                                                 ModelWeights::kMaxHeadDim));
  }
  return absl::OkStatus();
}

// The type a matrix without a matmul kernel is converted to: quantized
// types stay 8-bit (Q8_0) when the row allows, everything else goes to F32
// (lossless for F16 / BF16).
GgmlType ConversionTarget(GgmlType from, int64_t cols) {
  if (GetGgmlTypeTraits(from).block_size > 1 && cols % 32 == 0 &&
      IsMatMulWeightType(GgmlType::kQ8_0)) {
    return GgmlType::kQ8_0;
  }
  return GgmlType::kF32;
}

// Whether Dummy can write every matrix of `c` as `recipe` says: a type
// QuantizeRow supports, widths that are whole blocks (256 for the mixes,
// which are all K-quant blocks, so llama.cpp's fallbacks never apply).
absl::Status CheckDummyRecipe(const ModelConfig& c,
                              const WeightRecipe& recipe) {
  const bool uniform = recipe.mix() == WeightMix::kUniform;
  if (uniform && !CanQuantize(recipe.base_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("dummy weights cannot be ", recipe.name(),
                     "; supported: ", WeightsDtypeNames()));
  }
  // The K-quant mixes' blocks are 256 wide; MXFP4_MOE's (MXFP4, Q8_0) 32.
  const int64_t block =
      uniform || recipe.mix() == WeightMix::kMxfp4Moe
          ? GetGgmlTypeTraits(recipe.base_type()).block_size
          : 256;
  std::vector<int64_t> widths = {c.n_embd, c.n_heads * c.head_dim,
                                 c.is_moe() ? c.n_ff_exp : c.n_ff};
  if (c.n_ff_shexp > 0) widths.push_back(c.n_ff_shexp);
  if (c.NumRecurrentLayers() > 0) widths.push_back(c.ssm_value_dim());
  for (int64_t cols : widths) {
    if (cols % block != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dummy weights as ", recipe.name(), " need widths that are ",
          "multiples of ", block, "; this shape has ", cols));
    }
  }
  return absl::OkStatus();
}

std::string TensorName(int64_t layer, absl::string_view suffix) {
  return absl::StrCat("blk.", layer, ".", suffix);
}

// Expert e's matrix in a 3-D expert tensor viewed as n_expert stacked
// matrices of `all.rows / n_expert` rows each (rows are whole blocks, so
// every quantized type slices cleanly).
WeightView ExpertSlice(const WeightView& all, int64_t n_expert, int64_t e) {
  WeightView v = all;
  v.rows = all.rows / n_expert;
  v.data = static_cast<const uint8_t*>(all.data) +
           static_cast<size_t>(e * v.rows) * all.row_bytes;
  return v;
}

// Splits the stacked expert tensors into l->experts.
void SliceExperts(const WeightView& gate, const WeightView& up,
                  const WeightView& down, int64_t n_expert, LayerWeights* l) {
  l->experts.resize(n_expert);
  for (int64_t e = 0; e < n_expert; ++e) {
    l->experts[e] = {.gate = ExpertSlice(gate, n_expert, e),
                     .up = ExpertSlice(up, n_expert, e),
                     .down = ExpertSlice(down, n_expert, e)};
  }
}

}  // namespace

// Builds ModelWeights from a file or from random numbers; a friend so that
// the loading code stays out of the header.
class WeightsBuilder {
 public:
  explicit WeightsBuilder(ModelWeights* w) : w_(*w) {}

  // ---- From a GGUF file. ----

  absl::Status LoadFromFile() {
    const GgufFile& file = *w_.file_;
    const ModelConfig& c = w_.config_;
    const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
    if (!GetGgmlTypeTraits(embd->type).can_dequantize) {
      return absl::UnimplementedError(absl::StrCat(
          "token_embd.weight has type ", GetGgmlTypeTraits(embd->type).name,
          ", which cannot be dequantized yet"));
    }
    w_.token_embd_ = ViewOf(*embd, c.n_vocab, c.n_embd);
    ASSIGN_OR_RETURN(w_.output_norm_,
                     FileVector("output_norm.weight", c.n_embd));
    if (file.FindTensor("rope_freqs.weight") != nullptr) {
      ASSIGN_OR_RETURN(w_.rope_freq_factors_,
                       FileVector("rope_freqs.weight", c.rope_dim / 2));
      for (const float f : w_.rope_freq_factors_) {
        if (!(f > 0) || !std::isfinite(f)) {
          return absl::InvalidArgumentError(
              absl::StrCat("tensor 'rope_freqs.weight' holds ", f,
                           "; frequency factors must be finite and positive"));
        }
      }
    }
    ASSIGN_OR_RETURN(w_.output_, FileMatrix(c.tied_output ? "token_embd.weight"
                                                          : "output.weight",
                                            c.n_vocab, c.n_embd));
    w_.layers_.resize(c.n_layers);
    for (int64_t i = 0; i < c.n_layers; ++i) {
      LayerWeights& l = w_.layers_[i];
      const auto name = [i](absl::string_view s) { return TensorName(i, s); };
      ASSIGN_OR_RETURN(l.attn_norm,
                       FileVector(name("attn_norm.weight"), c.n_embd));
      if (c.IsRecurrentLayer(i)) {
        RETURN_IF_ERROR(LoadDeltaNet(i, &l));
      } else {
        RETURN_IF_ERROR(LoadAttention(i, &l));
      }
      ASSIGN_OR_RETURN(l.ffn_norm,
                       FileVector(name(c.ffn_norm_is_post_attention_norm
                                           ? "post_attention_norm.weight"
                                           : "ffn_norm.weight"),
                                  c.n_embd));
      if (c.post_norms) {
        ASSIGN_OR_RETURN(
            l.post_attn_norm,
            FileVector(name("post_attention_norm.weight"), c.n_embd));
        ASSIGN_OR_RETURN(l.post_ffn_norm,
                         FileVector(name("post_ffw_norm.weight"), c.n_embd));
      }
      RETURN_IF_ERROR(c.is_moe() ? LoadExperts(i, &l) : LoadDenseFfn(i, &l));
    }
    for (const auto& [types, count] : conversions_) {
      std::cerr << "paceline: converted " << count << " tensor"
                << (count == 1 ? "" : "s") << " from "
                << GetGgmlTypeTraits(types.first).name << " to "
                << GetGgmlTypeTraits(types.second).name
                << " at load (no matmul kernel for "
                << GetGgmlTypeTraits(types.first).name << ")\n";
    }
    return absl::OkStatus();
  }

  // An attention layer's Q/K/V (attn_q with its gate rows when
  // config.attn_output_gate), biases, norms, output and sinks.
  absl::Status LoadAttention(int64_t i, LayerWeights* lw) {
    const ModelConfig& c = w_.config_;
    const int64_t q_dim = c.n_heads * c.head_dim;
    const int64_t kv_dim = c.n_kv_heads * c.head_dim;
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    LayerWeights& l = *lw;
    ASSIGN_OR_RETURN(
        l.attn_q, FileMatrix(name("attn_q.weight"),
                             q_dim * (c.attn_output_gate ? 2 : 1), c.n_embd));
    ASSIGN_OR_RETURN(l.attn_k,
                     FileMatrix(name("attn_k.weight"), kv_dim, c.n_embd));
    ASSIGN_OR_RETURN(l.attn_v,
                     FileMatrix(name("attn_v.weight"), kv_dim, c.n_embd));
    if (c.qkv_bias) {
      ASSIGN_OR_RETURN(l.q_bias, FileVector(name("attn_q.bias"), q_dim));
      ASSIGN_OR_RETURN(l.k_bias, FileVector(name("attn_k.bias"), kv_dim));
      ASSIGN_OR_RETURN(l.v_bias, FileVector(name("attn_v.bias"), kv_dim));
    }
    if (c.qk_norm) {
      ASSIGN_OR_RETURN(l.q_norm,
                       FileVector(name("attn_q_norm.weight"), c.head_dim));
      ASSIGN_OR_RETURN(l.k_norm,
                       FileVector(name("attn_k_norm.weight"), c.head_dim));
    }
    ASSIGN_OR_RETURN(l.attn_output,
                     FileMatrix(name("attn_output.weight"), c.n_embd, q_dim));
    if (c.attn_output_bias) {
      ASSIGN_OR_RETURN(l.o_bias,
                       FileVector(name("attn_output.bias"), c.n_embd));
    }
    if (c.attn_sinks) {
      ASSIGN_OR_RETURN(l.attn_sinks,
                       FileVector(name("attn_sinks.weight"), c.n_heads));
    }
    return absl::OkStatus();
  }

  // A Gated DeltaNet layer's projections, convolution, decay and norm.
  absl::Status LoadDeltaNet(int64_t i, LayerWeights* l) {
    const ModelConfig& c = w_.config_;
    const int64_t nv = c.ssm_v_heads, inner = c.ssm_value_dim();
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    ASSIGN_OR_RETURN(l->ssm_qkv, FileMatrix(name("attn_qkv.weight"),
                                            c.ssm_conv_dim(), c.n_embd));
    ASSIGN_OR_RETURN(l->ssm_z,
                     FileMatrix(name("attn_gate.weight"), inner, c.n_embd));
    if (c.ssm_fused_ba) {
      ASSIGN_OR_RETURN(l->ssm_ba,
                       FileMatrix(name("ssm_ba.weight"), 2 * nv, c.n_embd));
    } else {
      ASSIGN_OR_RETURN(l->ssm_beta,
                       FileMatrix(name("ssm_beta.weight"), nv, c.n_embd));
      ASSIGN_OR_RETURN(l->ssm_alpha,
                       FileMatrix(name("ssm_alpha.weight"), nv, c.n_embd));
    }
    ASSIGN_OR_RETURN(l->ssm_conv1d,
                     FileVector(name("ssm_conv1d.weight"),
                                c.ssm_conv_dim() * c.ssm_conv_kernel));
    ASSIGN_OR_RETURN(l->ssm_a, FileVector(name("ssm_a"), nv));
    ASSIGN_OR_RETURN(l->ssm_dt_bias, FileVector(name("ssm_dt.bias"), nv));
    ASSIGN_OR_RETURN(l->ssm_norm,
                     FileVector(name("ssm_norm.weight"), c.ssm_state_size));
    ASSIGN_OR_RETURN(l->ssm_out,
                     FileMatrix(name("ssm_out.weight"), c.n_embd, inner));
    return absl::OkStatus();
  }

  absl::Status LoadDenseFfn(int64_t i, LayerWeights* l) {
    const ModelConfig& c = w_.config_;
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    ASSIGN_OR_RETURN(l->ffn_gate,
                     FileMatrix(name("ffn_gate.weight"), c.n_ff, c.n_embd));
    ASSIGN_OR_RETURN(l->ffn_up,
                     FileMatrix(name("ffn_up.weight"), c.n_ff, c.n_embd));
    ASSIGN_OR_RETURN(l->ffn_down,
                     FileMatrix(name("ffn_down.weight"), c.n_embd, c.n_ff));
    return absl::OkStatus();
  }

  // The router and the 3-D expert tensors, each viewed (converted when its
  // type has no kernel) as n_expert stacked matrices and then sliced.
  absl::Status LoadExperts(int64_t i, LayerWeights* l) {
    const ModelConfig& c = w_.config_;
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    const int64_t stacked = c.n_expert * c.n_ff_exp;
    ASSIGN_OR_RETURN(l->ffn_gate_inp, FileMatrix(name("ffn_gate_inp.weight"),
                                                 c.n_expert, c.n_embd));
    ASSIGN_OR_RETURN(
        const WeightView gate,
        FileMatrix(name("ffn_gate_exps.weight"), stacked, c.n_embd));
    ASSIGN_OR_RETURN(const WeightView up,
                     FileMatrix(name("ffn_up_exps.weight"), stacked, c.n_embd));
    ASSIGN_OR_RETURN(const WeightView down,
                     FileMatrix(name("ffn_down_exps.weight"),
                                c.n_expert * c.n_embd, c.n_ff_exp));
    SliceExperts(gate, up, down, c.n_expert, l);
    if (c.n_ff_shexp > 0) {
      const int64_t sh = c.n_ff_shexp;
      ASSIGN_OR_RETURN(l->ffn_gate_shexp,
                       FileMatrix(name("ffn_gate_shexp.weight"), sh, c.n_embd));
      ASSIGN_OR_RETURN(l->ffn_up_shexp,
                       FileMatrix(name("ffn_up_shexp.weight"), sh, c.n_embd));
      ASSIGN_OR_RETURN(l->ffn_down_shexp,
                       FileMatrix(name("ffn_down_shexp.weight"), c.n_embd, sh));
      ASSIGN_OR_RETURN(l->ffn_gate_inp_shexp,
                       FileVector(name("ffn_gate_inp_shexp.weight"), c.n_embd));
    }
    if (!c.moe_biases) return absl::OkStatus();
    ASSIGN_OR_RETURN(l->router_bias,
                     FileVector(name("ffn_gate_inp.bias"), c.n_expert));
    ASSIGN_OR_RETURN(l->gate_exps_bias,
                     FileVector(name("ffn_gate_exps.bias"), stacked));
    ASSIGN_OR_RETURN(l->up_exps_bias,
                     FileVector(name("ffn_up_exps.bias"), stacked));
    ASSIGN_OR_RETURN(l->down_exps_bias, FileVector(name("ffn_down_exps.bias"),
                                                   c.n_expert * c.n_embd));
    return absl::OkStatus();
  }

  // ---- Random weights. ----

  absl::Status Generate(const WeightRecipe& recipe, uint64_t seed) {
    const ModelConfig& c = w_.config_;
    RETURN_IF_ERROR(CheckDummyRecipe(c, recipe));
    seed_ = seed;
    // One matrix of `role` in `layer`, in the recipe's type for it.
    const auto matrix = [&](const std::string& name, MatrixRole role,
                            int64_t layer, int64_t rows, int64_t cols) {
      return RandomMatrix(name, rows, cols,
                          recipe.TypeOf(c, {role, layer, rows, cols}));
    };
    using R = MatrixRole;
    w_.token_embd_ =
        matrix("token_embd.weight", R::kTokenEmbd, -1, c.n_vocab, c.n_embd);
    w_.output_norm_ = RandomVector("output_norm.weight", c.n_embd, 1.0f);
    w_.output_ = c.tied_output ? w_.token_embd_
                               : matrix("output.weight", R::kOutput, -1,
                                        c.n_vocab, c.n_embd);
    w_.layers_.resize(c.n_layers);
    for (int64_t i = 0; i < c.n_layers; ++i) {
      LayerWeights& l = w_.layers_[i];
      const auto name = [i](absl::string_view s) { return TensorName(i, s); };
      l.attn_norm = RandomVector(name("attn_norm.weight"), c.n_embd, 1.0f);
      if (c.IsRecurrentLayer(i)) {
        RandomDeltaNet(i, recipe, &l);
      } else {
        RandomAttention(i, recipe, &l);
      }
      l.ffn_norm = RandomVector(name("ffn_norm.weight"), c.n_embd, 1.0f);
      if (c.post_norms) {
        l.post_attn_norm =
            RandomVector(name("post_attention_norm.weight"), c.n_embd, 1.0f);
        l.post_ffn_norm =
            RandomVector(name("post_ffw_norm.weight"), c.n_embd, 1.0f);
      }
      if (c.is_moe()) {
        RandomExperts(i, recipe, &l);
        continue;
      }
      l.ffn_gate =
          matrix(name("ffn_gate.weight"), R::kFfnGate, i, c.n_ff, c.n_embd);
      l.ffn_up = matrix(name("ffn_up.weight"), R::kFfnUp, i, c.n_ff, c.n_embd);
      l.ffn_down =
          matrix(name("ffn_down.weight"), R::kFfnDown, i, c.n_embd, c.n_ff);
    }
    return FillRandomMatrices();
  }

 private:
  // One matrix of `role` in `layer`, in the recipe's type for it.
  WeightView RecipeMatrix(const std::string& name, const WeightRecipe& recipe,
                          MatrixRole role, int64_t layer, int64_t rows,
                          int64_t cols) {
    return RandomMatrix(name, rows, cols,
                        recipe.TypeOf(w_.config_, {role, layer, rows, cols}));
  }

  // Layer i's attention (attn_q with its gate rows where the config says).
  void RandomAttention(int64_t i, const WeightRecipe& recipe,
                       LayerWeights* lw) {
    const ModelConfig& c = w_.config_;
    const int64_t q_dim = c.n_heads * c.head_dim;
    const int64_t kv_dim = c.n_kv_heads * c.head_dim;
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    const auto matrix = [&](const std::string& n, MatrixRole role,
                            int64_t rows, int64_t cols) {
      return RecipeMatrix(n, recipe, role, i, rows, cols);
    };
    using R = MatrixRole;
    LayerWeights& l = *lw;
    l.attn_q = matrix(name("attn_q.weight"), R::kAttnQ,
                      q_dim * (c.attn_output_gate ? 2 : 1), c.n_embd);
    l.attn_k = matrix(name("attn_k.weight"), R::kAttnK, kv_dim, c.n_embd);
    l.attn_v = matrix(name("attn_v.weight"), R::kAttnV, kv_dim, c.n_embd);
    if (c.qkv_bias) {
      l.q_bias = RandomVector(name("attn_q.bias"), q_dim, 0.0f);
      l.k_bias = RandomVector(name("attn_k.bias"), kv_dim, 0.0f);
      l.v_bias = RandomVector(name("attn_v.bias"), kv_dim, 0.0f);
    }
    if (c.qk_norm) {
      l.q_norm = RandomVector(name("attn_q_norm.weight"), c.head_dim, 1.0f);
      l.k_norm = RandomVector(name("attn_k_norm.weight"), c.head_dim, 1.0f);
    }
    l.attn_output = matrix(name("attn_output.weight"), R::kAttnOutput,
                           c.n_embd, q_dim);
    if (c.attn_output_bias) {
      l.o_bias = RandomVector(name("attn_output.bias"), c.n_embd, 0.0f);
    }
    if (c.attn_sinks) {
      l.attn_sinks = RandomVector(name("attn_sinks.weight"), c.n_heads, 0.0f);
    }
  }

  // Layer i's Gated DeltaNet: its projections in the recipe's types; a
  // decay per head of exp(softplus(-1) · -1) ≈ 0.73 per token.
  void RandomDeltaNet(int64_t i, const WeightRecipe& recipe,
                      LayerWeights* l) {
    const ModelConfig& c = w_.config_;
    const int64_t nv = c.ssm_v_heads, inner = c.ssm_value_dim();
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    using R = MatrixRole;
    l->ssm_qkv = RecipeMatrix(name("attn_qkv.weight"), recipe, R::kSsmQkv, i,
                              c.ssm_conv_dim(), c.n_embd);
    l->ssm_z = RecipeMatrix(name("attn_gate.weight"), recipe, R::kSsmGate, i,
                            inner, c.n_embd);
    if (c.ssm_fused_ba) {
      l->ssm_ba = RecipeMatrix(name("ssm_ba.weight"), recipe, R::kSsmBeta, i,
                               2 * nv, c.n_embd);
    } else {
      l->ssm_beta = RecipeMatrix(name("ssm_beta.weight"), recipe, R::kSsmBeta,
                                 i, nv, c.n_embd);
      l->ssm_alpha = RecipeMatrix(name("ssm_alpha.weight"), recipe,
                                  R::kSsmAlpha, i, nv, c.n_embd);
    }
    l->ssm_conv1d = RandomVector(name("ssm_conv1d.weight"),
                                 c.ssm_conv_dim() * c.ssm_conv_kernel, 0.0f);
    l->ssm_a = RandomVector(name("ssm_a"), nv, -1.0f);
    l->ssm_dt_bias = RandomVector(name("ssm_dt.bias"), nv, -1.0f);
    l->ssm_norm = RandomVector(name("ssm_norm.weight"), c.ssm_state_size, 1.0f);
    l->ssm_out = RecipeMatrix(name("ssm_out.weight"), recipe, R::kSsmOut, i,
                              c.n_embd, inner);
  }

  // A reproducible stream of normal(0, 1) numbers (xoshiro256** seeded
  // through splitmix64; Box-Muller).
  class NormalStream {
   public:
    explicit NormalStream(uint64_t seed) {
      for (uint64_t& s : s_) s = SplitMix(seed);
    }
    float Next() {
      if (has_spare_) {
        has_spare_ = false;
        return spare_;
      }
      // u1 in (0, 1], u2 in [0, 1), 53 random bits each.
      const double u1 = (static_cast<double>(NextU64() >> 11) + 1) * 0x1p-53;
      const double u2 = static_cast<double>(NextU64() >> 11) * 0x1p-53;
      const double r = std::sqrt(-2 * std::log(u1));
      const double a = 2 * M_PI * u2;
      spare_ = static_cast<float>(r * std::sin(a));
      has_spare_ = true;
      return static_cast<float>(r * std::cos(a));
    }

    static uint64_t SplitMix(uint64_t& x) {
      uint64_t z = (x += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    }

   private:
    static uint64_t Rotl(uint64_t x, int k) {
      return (x << k) | (x >> (64 - k));
    }
    uint64_t NextU64() {
      const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
      const uint64_t t = s_[1] << 17;
      s_[2] ^= s_[0];
      s_[3] ^= s_[1];
      s_[1] ^= s_[2];
      s_[0] ^= s_[3];
      s_[2] ^= t;
      s_[3] = Rotl(s_[3], 45);
      return result;
    }
    uint64_t s_[4];
    bool has_spare_ = false;
    float spare_ = 0;
  };

  static constexpr float kStd = 0.02f;

  // The generator seed of one row of one tensor: the run's seed, the
  // tensor's name (FNV-1a) and the row.
  uint64_t RowSeed(absl::string_view name, int64_t row) const {
    uint64_t h = 0xCBF29CE484222325ull;
    for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001B3ull;
    uint64_t x = seed_ ^ h;
    x = NormalStream::SplitMix(x) ^ static_cast<uint64_t>(row);
    return NormalStream::SplitMix(x);
  }

  std::vector<float> RandomVector(const std::string& name, int64_t n,
                                  float mean) {
    NormalStream rng(RowSeed(name, 0));
    std::vector<float> v(n);
    for (float& x : v) x = mean + kStd * rng.Next();
    return v;
  }

  // Allocates the matrix; its rows are filled by FillRandomMatrices().
  WeightView RandomMatrix(const std::string& name, int64_t rows, int64_t cols,
                          GgmlType type) {
    WeightView v;
    v.type = type;
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = static_cast<size_t>(*GgmlRowBytes(type, cols));
    v.data = w_.Allocate(v.row_bytes * rows);
    pending_.push_back({name, v});
    return v;
  }

  // A MoE layer's router and experts. The router is F32 whatever `type`
  // (as llama.cpp's quantizer leaves ffn_gate_inp) and has the standard
  // deviation of a file's, 1/sqrt(n_embd), so routing is not a near-tie.
  // Layer i's router (F32) and experts, in the recipe's FFN types.
  void RandomExperts(int64_t i, const WeightRecipe& recipe, LayerWeights* l) {
    const ModelConfig& c = w_.config_;
    const auto name = [i](absl::string_view s) { return TensorName(i, s); };
    const int64_t stacked = c.n_expert * c.n_ff_exp;
    const int64_t down_rows = c.n_expert * c.n_embd;
    using R = MatrixRole;
    l->ffn_gate_inp = RandomMatrix(name("ffn_gate_inp.weight"), c.n_expert,
                                   c.n_embd, GgmlType::kF32);
    pending_.back().std = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    const WeightView gate =
        RandomMatrix(name("ffn_gate_exps.weight"), stacked, c.n_embd,
                     recipe.TypeOf(c, {R::kFfnGate, i, stacked, c.n_embd}));
    const WeightView up =
        RandomMatrix(name("ffn_up_exps.weight"), stacked, c.n_embd,
                     recipe.TypeOf(c, {R::kFfnUp, i, stacked, c.n_embd}));
    const WeightView down =
        RandomMatrix(name("ffn_down_exps.weight"), down_rows, c.n_ff_exp,
                     recipe.TypeOf(c, {R::kFfnDown, i, down_rows, c.n_ff_exp}));
    SliceExperts(gate, up, down, c.n_expert, l);
    if (c.n_ff_shexp > 0) {
      const int64_t sh = c.n_ff_shexp;
      l->ffn_gate_shexp = RecipeMatrix(name("ffn_gate_shexp.weight"), recipe,
                                       R::kFfnGateShexp, i, sh, c.n_embd);
      l->ffn_up_shexp = RecipeMatrix(name("ffn_up_shexp.weight"), recipe,
                                     R::kFfnUpShexp, i, sh, c.n_embd);
      l->ffn_down_shexp = RecipeMatrix(name("ffn_down_shexp.weight"), recipe,
                                       R::kFfnDownShexp, i, c.n_embd, sh);
      l->ffn_gate_inp_shexp =
          RandomVector(name("ffn_gate_inp_shexp.weight"), c.n_embd, 0.0f);
    }
    if (!c.moe_biases) return;
    l->router_bias = RandomVector(name("ffn_gate_inp.bias"), c.n_expert, 0.0f);
    l->gate_exps_bias = RandomVector(name("ffn_gate_exps.bias"), stacked, 0.0f);
    l->up_exps_bias = RandomVector(name("ffn_up_exps.bias"), stacked, 0.0f);
    l->down_exps_bias =
        RandomVector(name("ffn_down_exps.bias"), c.n_expert * c.n_embd, 0.0f);
  }

  absl::Status FillRandomMatrices() {
    constexpr int64_t kRowsPerTask = 64;
    struct Task {
      size_t matrix;
      int64_t row_begin;
    };
    std::vector<Task> tasks;
    for (size_t m = 0; m < pending_.size(); ++m) {
      for (int64_t r = 0; r < pending_[m].view.rows; r += kRowsPerTask) {
        tasks.push_back({m, r});
      }
    }
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    const auto work = [&] {
      std::vector<float> row;
      for (size_t t; (t = next.fetch_add(1)) < tasks.size();) {
        const Pending& p = pending_[tasks[t].matrix];
        const WeightView& v = p.view;
        row.resize(v.cols);
        const int64_t end = std::min(v.rows, tasks[t].row_begin + kRowsPerTask);
        for (int64_t r = tasks[t].row_begin; r < end; ++r) {
          NormalStream rng(RowSeed(p.name, r));
          for (float& x : row) x = p.std * rng.Next();
          auto* dst = static_cast<uint8_t*>(const_cast<void*>(v.data)) +
                      static_cast<size_t>(r) * v.row_bytes;
          if (!QuantizeRow(v.type, row.data(), v.cols, dst).ok()) failed = true;
        }
      }
    };
    const unsigned n_threads =
        std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < n_threads; ++i) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    pending_.clear();
    if (failed) return absl::InternalError("quantizing dummy weights failed");
    return absl::OkStatus();
  }

  WeightView ViewOf(const GgufTensorInfo& t, int64_t rows, int64_t cols) {
    WeightView v;
    v.type = t.type;
    v.rows = rows;
    v.cols = cols;
    v.data = t.data;
    v.row_bytes = static_cast<size_t>(t.size_bytes / rows);
    return v;
  }

  absl::StatusOr<WeightView> FileMatrix(const std::string& name, int64_t rows,
                                        int64_t cols) {
    const GgufTensorInfo* t = w_.file_->FindTensor(name);
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("tensor '", name, "' is missing"));
    }
    const WeightView src = ViewOf(*t, rows, cols);
    if (IsMatMulWeightType(t->type)) return src;
    if (!GetGgmlTypeTraits(t->type).can_dequantize) {
      return absl::UnimplementedError(absl::StrCat(
          "tensor '", name, "' has type ", GetGgmlTypeTraits(t->type).name,
          ", which has no matmul kernel and cannot be dequantized yet"));
    }
    WeightView dst;
    dst.type = ConversionTarget(t->type, cols);
    dst.rows = rows;
    dst.cols = cols;
    ASSIGN_OR_RETURN(const uint64_t row_bytes, GgmlRowBytes(dst.type, cols));
    dst.row_bytes = static_cast<size_t>(row_bytes);
    uint8_t* out = w_.Allocate(dst.row_bytes * rows);
    dst.data = out;
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      RETURN_IF_ERROR(DequantizeRow(
          src.type, static_cast<const uint8_t*>(src.data) + r * src.row_bytes,
          row.data(), cols));
      RETURN_IF_ERROR(
          QuantizeRow(dst.type, row.data(), cols,
                      out + static_cast<size_t>(r) * dst.row_bytes));
    }
    ++conversions_[{src.type, dst.type}];
    return dst;
  }

  absl::StatusOr<std::vector<float>> FileVector(const std::string& name,
                                                int64_t n) {
    const GgufTensorInfo* t = w_.file_->FindTensor(name);
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("tensor '", name, "' is missing"));
    }
    std::vector<float> v(n);
    absl::Status s = DequantizeRow(t->type, t->data, v.data(), n);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("tensor '", name, "': ", s.message()));
    }
    return v;
  }

  struct Pending {
    std::string name;
    WeightView view;
    float std = kStd;
  };

  ModelWeights& w_;
  uint64_t seed_ = 0;
  std::vector<Pending> pending_;
  std::map<std::pair<GgmlType, GgmlType>, int> conversions_;
};

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::FromGguf(
    std::unique_ptr<GgufFile> file) {
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfigFromGguf(*file));
  RETURN_IF_ERROR(CheckModelTensors(*file, config));
  ASSIGN_OR_RETURN(const InventoryReport inventory,
                   CheckModelInventory(*file, config));
  RETURN_IF_ERROR(CheckSupportedConfig(config));
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->config_ = std::move(config);
  w->file_ = std::move(file);
  RETURN_IF_ERROR(WeightsBuilder(w.get()).LoadFromFile());
  for (const std::string& line : inventory.WarningLines()) {
    std::cerr << "paceline: warning: " << line << "\n";
  }
  return w;
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Dummy(
    const ModelConfig& config, const WeightRecipe& recipe, uint64_t seed) {
  RETURN_IF_ERROR(CheckSupportedConfig(config));
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->config_ = config;
  RETURN_IF_ERROR(WeightsBuilder(w.get()).Generate(recipe, seed));
  return w;
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Dummy(
    const ModelConfig& config, GgmlType type, uint64_t seed) {
  return Dummy(config, WeightRecipe::Uniform(type), seed);
}

}  // namespace paceline::engine
