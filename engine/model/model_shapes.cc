#include "engine/model/model_shapes.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "engine/model/layer_program.h"
#include "engine/model/weight_recipe.h"

namespace paceline::engine {
namespace {

struct Shape {
  absl::string_view name;
  absl::string_view architecture;
  int64_t n_layers = 0;
  int64_t n_embd = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t context_length = 0;
  double rope_freq_base = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tied_output = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  int64_t n_expert = 0;  // mixture of experts (qwen3moe, gpt-oss) when > 0
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t sliding_window = 0;  // model_config.h's sliding-window fields
  int64_t swa_period = 0;
  double rope_freq_base_swa = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 1.0;
  int64_t rope_original_context = 0;
  int64_t rope_dim = 0;  // 0: head_dim
  // Hybrid linear attention (model_config.h's ssm_* fields) when > 0.
  int64_t full_attention_interval = 0;
  int64_t ssm_conv_kernel = 0;
  int64_t ssm_state_size = 0;
  int64_t ssm_k_heads = 0;
  int64_t ssm_v_heads = 0;
  int64_t n_ff_shexp = 0;
};

// clang-format off
constexpr Shape kShapes[] = {
    // stories*: karpathy/llama2.c README.md "models" table (dim, layers,
    // heads, KV heads, max context) and model.py (FFN = 2/3 × 4 × dim rounded
    // up to a multiple of 32, vocab 32000, RoPE base 10000, eps 1e-5).
    // llama2.c ties the output matrix to the embedding, but llama.cpp's
    // llama2c converter writes a separate output.weight, which is what their
    // GGUF files hold (ANCHORS.md: 134.1M weights for the 110M shape).
    {.name = "stories15m", .architecture = "llama",
     .n_layers = 6, .n_embd = 288, .n_heads = 6, .n_kv_heads = 6,
     .head_dim = 48, .n_ff = 768, .n_vocab = 32000, .context_length = 256},
    {.name = "stories42m", .architecture = "llama",
     .n_layers = 8, .n_embd = 512, .n_heads = 8, .n_kv_heads = 8,
     .head_dim = 64, .n_ff = 1376, .n_vocab = 32000, .context_length = 1024},
    {.name = "stories110m", .architecture = "llama",
     .n_layers = 12, .n_embd = 768, .n_heads = 12, .n_kv_heads = 12,
     .head_dim = 64, .n_ff = 2048, .n_vocab = 32000, .context_length = 1024},
    // Qwen/Qwen2-0.5B config.json (494M parameters). Its
    // max_position_embeddings says 131072; the model card's context is 32K.
    {.name = "qwen2-0.5b", .architecture = "qwen2",
     .n_layers = 24, .n_embd = 896, .n_heads = 14, .n_kv_heads = 2,
     .head_dim = 64, .n_ff = 4864, .n_vocab = 151936, .context_length = 32768,
     .rope_freq_base = 1e6, .rms_norm_eps = 1e-6,
     .tied_output = true, .qkv_bias = true},
    // Not a published model: stories110m's layer sizes with each FFN made a
    // qwen3moe mixture of 8 experts of the same width, 2 used per token
    // (the MoE benchmark shape; 530.5M weights, 190.8M active).
    {.name = "stories110m-moe", .architecture = "qwen3moe",
     .n_layers = 12, .n_embd = 768, .n_heads = 12, .n_kv_heads = 12,
     .head_dim = 64, .n_ff = 2048, .n_vocab = 32000, .context_length = 1024,
     .qk_norm = true, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 2048},
    // Qwen/Qwen3-0.6B config.json (596M parameters; head_dim is not
    // n_embd / n_heads).
    {.name = "qwen3-0.6b", .architecture = "qwen3",
     .n_layers = 28, .n_embd = 1024, .n_heads = 16, .n_kv_heads = 8,
     .head_dim = 128, .n_ff = 3072, .n_vocab = 151936, .context_length = 40960,
     .rope_freq_base = 1e6, .rms_norm_eps = 1e-6,
     .tied_output = true, .qk_norm = true},
    // meta-llama/Llama-3.2-1B config.json (1.24B parameters). Its "llama3"
    // RoPE frequency scaling (factor 32 over an original 8192 context) has no
    // RopeScaling value yet and is left out.
    {.name = "llama-1b", .architecture = "llama",
     .n_layers = 16, .n_embd = 2048, .n_heads = 32, .n_kv_heads = 8,
     .head_dim = 64, .n_ff = 8192, .n_vocab = 128256, .context_length = 131072,
     .rope_freq_base = 5e5, .tied_output = true},
    // meta-llama/Llama-2-7b-hf config.json (6.74B parameters).
    {.name = "llama-7b", .architecture = "llama",
     .n_layers = 32, .n_embd = 4096, .n_heads = 32, .n_kv_heads = 32,
     .head_dim = 128, .n_ff = 11008, .n_vocab = 32000, .context_length = 4096},
    // meta-llama/Meta-Llama-3-8B config.json (8.03B parameters).
    {.name = "llama-3-8b", .architecture = "llama",
     .n_layers = 32, .n_embd = 4096, .n_heads = 32, .n_kv_heads = 8,
     .head_dim = 128, .n_ff = 14336, .n_vocab = 128256, .context_length = 8192,
     .rope_freq_base = 5e5},
    // google/gemma-3-4b-it config.json, text_config (3.88B parameters with
    // GGUF's 262,144-token vocabulary): 5 sliding layers (window 1,024,
    // RoPE base 1e4) per global one (base 1e6, linear scaling x8).
    {.name = "gemma3-4b", .architecture = "gemma3",
     .n_layers = 34, .n_embd = 2560, .n_heads = 8, .n_kv_heads = 4,
     .head_dim = 256, .n_ff = 10240, .n_vocab = 262144,
     .context_length = 131072, .rope_freq_base = 1e6, .rms_norm_eps = 1e-6,
     .tied_output = true, .qk_norm = true,
     .sliding_window = 1024, .swa_period = 6, .rope_freq_base_swa = 1e4,
     .rope_scaling = RopeScaling::kLinear, .rope_scaling_factor = 8},
    // openai/gpt-oss-20b config.json (20.9B parameters):
    // sliding (window 128) and full layers alternating, 32 experts of
    // width 2,880, 4 used, YaRN x32 over a 4,096 training context.
    {.name = "gpt-oss-20b", .architecture = "gpt-oss",
     .n_layers = 24, .n_embd = 2880, .n_heads = 64, .n_kv_heads = 8,
     .head_dim = 64, .n_ff = 2880, .n_vocab = 201088,
     .context_length = 131072, .rope_freq_base = 150000,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880,
     .sliding_window = 128, .swa_period = 2,
     .rope_scaling = RopeScaling::kYarn, .rope_scaling_factor = 32,
     .rope_original_context = 4096},
    // Not a published model: stories110m's widths with Qwen3.5's layer
    // pattern (a gated attention layer after every three Gated DeltaNet
    // layers of 6 key / 12 value heads of 64, whose matrices hold about
    // an attention layer's weights), attention as stories110m's, a 32K
    // context: the hybrid long-context benchmark shape.
    {.name = "stories110m-hybrid", .architecture = "qwen35",
     .n_layers = 12, .n_embd = 768, .n_heads = 12, .n_kv_heads = 12,
     .head_dim = 64, .n_ff = 2048, .n_vocab = 32000, .context_length = 32768,
     .rms_norm_eps = 1e-6, .qk_norm = true, .rope_dim = 16,
     .full_attention_interval = 4, .ssm_conv_kernel = 4,
     .ssm_state_size = 64, .ssm_k_heads = 6, .ssm_v_heads = 12},
    // Qwen/Qwen3-Next-80B-A3B-Instruct config.json (80B parameters, 3B
    // active): 48 layers, every 4th gated attention (16 heads, 2 KV heads
    // of 256, a quarter of them rotated), Gated DeltaNet with 16 key / 32
    // value heads of 128, 512 experts of 512 (10 used) and a shared one.
    {.name = "qwen3-next-80b-a3b", .architecture = "qwen3next",
     .n_layers = 48, .n_embd = 2048, .n_heads = 16, .n_kv_heads = 2,
     .head_dim = 256, .n_ff = 5120, .n_vocab = 151936,
     .context_length = 262144, .rope_freq_base = 1e7, .rms_norm_eps = 1e-6,
     .qk_norm = true, .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512,
     .rope_dim = 64, .full_attention_interval = 4, .ssm_conv_kernel = 4,
     .ssm_state_size = 128, .ssm_k_heads = 16, .ssm_v_heads = 32,
     .n_ff_shexp = 512},
};
// clang-format on

ModelConfig ToConfig(const Shape& s) {
  ModelConfig c;
  c.architecture = std::string(s.architecture);
  c.name = std::string(s.name);
  c.n_layers = s.n_layers;
  c.n_embd = s.n_embd;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.n_ff = s.n_ff;
  c.n_vocab = s.n_vocab;
  c.context_length = s.context_length;
  const Architecture* arch = FindArchitecture(s.architecture);
  c.rope_layout =
      arch != nullptr ? arch->rope_layout : RopeLayout::kAdjacentPairs;
  c.rope_dim = s.rope_dim > 0 ? s.rope_dim : s.head_dim;
  c.full_attention_interval = s.full_attention_interval;
  c.ssm_conv_kernel = s.ssm_conv_kernel;
  c.ssm_state_size = s.ssm_state_size;
  c.ssm_k_heads = s.ssm_k_heads;
  c.ssm_v_heads = s.ssm_v_heads;
  c.n_ff_shexp = s.n_ff_shexp;
  c.rope_freq_base = s.rope_freq_base;
  c.rms_norm_eps = s.rms_norm_eps;
  c.tied_output = s.tied_output;
  c.qkv_bias = s.qkv_bias;
  c.qk_norm = s.qk_norm;
  c.n_expert = s.n_expert;
  c.n_expert_used = s.n_expert_used;
  c.n_ff_exp = s.n_ff_exp;
  c.sliding_window = s.sliding_window;
  c.swa_period = s.swa_period;
  c.rope_freq_base_swa = s.rope_freq_base_swa;
  c.rope_scaling = s.rope_scaling;
  c.rope_scaling_factor = s.rope_scaling_factor;
  c.rope_original_context = s.rope_original_context;
  if (arch != nullptr && arch->configure != nullptr) arch->configure(&c);
  return c;
}

}  // namespace

std::vector<absl::string_view> ModelShapeNames() {
  std::vector<absl::string_view> names;
  for (const Shape& s : kShapes) names.push_back(s.name);
  return names;
}

absl::StatusOr<ModelConfig> FindModelShape(absl::string_view name) {
  for (const Shape& s : kShapes) {
    if (s.name == name) return ToConfig(s);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown model shape '", name,
      "'; known shapes: ", absl::StrJoin(ModelShapeNames(), ", ")));
}

bool IsDummyModelSpec(absl::string_view model) {
  return absl::StartsWith(model, kDummyModelPrefix);
}

absl::StatusOr<DummyModelSpec> ParseDummyModelSpec(absl::string_view model) {
  if (!IsDummyModelSpec(model)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", model, "' is not a dummy:SHAPE[:DTYPE] model"));
  }
  absl::string_view rest = model.substr(kDummyModelPrefix.size());
  absl::string_view dtype;
  if (size_t colon = rest.find(':'); colon != absl::string_view::npos) {
    dtype = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (dtype.empty() || absl::StrContains(dtype, ':')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", model, "': expected dummy:SHAPE or dummy:SHAPE:DTYPE"));
    }
  }
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", model, "' names no shape; known shapes: ",
                     absl::StrJoin(ModelShapeNames(), ", ")));
  }
  DummyModelSpec spec;
  spec.shape = std::string(rest);
  ASSIGN_OR_RETURN(spec.config, FindModelShape(rest));
  if (!dtype.empty()) {
    ASSIGN_OR_RETURN(spec.weights_recipe, ParseWeightsDtype(dtype));
  }
  return spec;
}

}  // namespace paceline::engine
