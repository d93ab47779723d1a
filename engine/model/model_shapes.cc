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
  int64_t n_expert = 0;  // mixture of experts (qwen3moe) when > 0
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
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
  c.rope_layout = s.architecture == "llama" ? RopeLayout::kAdjacentPairs
                                            : RopeLayout::kNeoxHalves;
  c.rope_dim = s.head_dim;
  c.rope_freq_base = s.rope_freq_base;
  c.rms_norm_eps = s.rms_norm_eps;
  c.tied_output = s.tied_output;
  c.qkv_bias = s.qkv_bias;
  c.qk_norm = s.qk_norm;
  c.n_expert = s.n_expert;
  c.n_expert_used = s.n_expert_used;
  c.n_ff_exp = s.n_ff_exp;
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
