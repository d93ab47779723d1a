#include "engine/model/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "engine/model/kv_layout.h"

namespace paceline::engine {
namespace {

struct NamedDtype {
  absl::string_view name;
  GgmlType type;
};

constexpr NamedDtype kKvDtypes[] = {
    {"f32", GgmlType::kF32},
    {"f16", GgmlType::kF16},
    {"bf16", GgmlType::kBF16},
    {"q8_0", GgmlType::kQ8_0},
};

absl::StatusOr<uint64_t> Mul(uint64_t a, uint64_t b, absl::string_view what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " overflows 64 bits (", a, " x ", b, ")"));
  }
  return out;
}

absl::StatusOr<uint64_t> Add(uint64_t a, uint64_t b, absl::string_view what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " overflows 64 bits (", a, " + ", b, ")"));
  }
  return out;
}

// Bytes of `n` elements of `type`, rounding a partial block up.
absl::StatusOr<uint64_t> ElementBytes(GgmlType type, uint64_t n,
                                      absl::string_view what) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  const uint64_t block = static_cast<uint64_t>(traits.block_size);
  const uint64_t blocks = n / block + (n % block != 0 ? 1 : 0);
  return Mul(blocks, static_cast<uint64_t>(traits.type_size), what);
}

absl::Status CheckRequest(const MemoryPlanRequest& request) {
  if (request.weights_recipe.has_value() ==
      request.weights_file_bytes.has_value()) {
    return absl::InvalidArgumentError(
        "exactly one of weights_recipe and weights_file_bytes must be set");
  }
  if (request.context <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context must be positive, got ", request.context));
  }
  if (request.sequences <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequences must be positive, got ", request.sequences));
  }
  if (request.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block size must be positive, got ", request.block_size));
  }
  if (GetGgmlTypeTraits(request.kv_type).block_size != 1 &&
      request.kv_type != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache dtype ", DtypeName(request.kv_type),
                     " is not a KV cache type; use f32, f16, bf16 or q8_0"));
  }
  return absl::OkStatus();
}

// Bytes of K and V of `layers` layers for one token.
absl::StatusOr<uint64_t> KvBytesPerToken(const ModelConfig& config,
                                         GgmlType kv_type, int64_t layers) {
  int64_t head_dim = config.head_dim;
  if (head_dim == 0 && config.n_heads > 0) {
    head_dim = config.n_embd / config.n_heads;
  }
  if (config.n_layers <= 0 || config.n_kv_heads <= 0 || head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model shape needs layers, KV heads and a head size (got ",
                     config.n_layers, " layers, ", config.n_kv_heads,
                     " KV heads, head_dim ", head_dim, ")"));
  }
  constexpr absl::string_view kWhat = "KV bytes per token";
  ASSIGN_OR_RETURN(uint64_t n,
                   Mul(2 * static_cast<uint64_t>(layers),
                       static_cast<uint64_t>(config.n_kv_heads), kWhat));
  ASSIGN_OR_RETURN(n, Mul(n, static_cast<uint64_t>(head_dim), kWhat));
  return ElementBytes(kv_type, n, kWhat);
}

// One sequence's KV bytes (see the top); fills the plan's layout fields.
absl::StatusOr<uint64_t> KvBytesPerSequence(const ModelConfig& config,
                                            const MemoryPlanRequest& request,
                                            MemoryPlan* plan) {
  const KvLayout layout = PlanKvLayout(config, request.window_release);
  plan->kv_groups = layout.num_groups();
  plan->kv_slots = layout.slots;
  if (layout.num_groups() == 1) return plan->kv_bytes_per_sequence_full;
  ASSIGN_OR_RETURN(uint64_t per_slot,
                   KvBytesPerToken(config, request.kv_type, layout.slots));
  uint64_t total = 0;
  for (const KvGroup& g : layout.groups) {
    // A decoding sequence: one new position per step.
    const int64_t tokens = std::min(
        request.context, GroupBlocksToHold(g.window, request.block_size,
                                           request.context, 1) *
                             request.block_size);
    ASSIGN_OR_RETURN(uint64_t bytes,
                     Mul(per_slot, static_cast<uint64_t>(tokens), "KV bytes"));
    ASSIGN_OR_RETURN(total, Add(total, bytes, "KV bytes"));
  }
  return total;
}

// A mix's bytes: each matrix in its recipe type (a partial block rounds
// up), every other parameter (norms, biases) as F32.
absl::StatusOr<uint64_t> MixWeightBytes(const ModelConfig& config,
                                        const WeightRecipe& recipe,
                                        int64_t parameters) {
  constexpr absl::string_view kWhat = "weight bytes";
  uint64_t total = 0;
  uint64_t matrix_parameters = 0;
  for (const ModelMatrix& m : ModelMatrices(config)) {
    const uint64_t rows = static_cast<uint64_t>(m.rows);
    const uint64_t cols = static_cast<uint64_t>(m.cols);
    ASSIGN_OR_RETURN(uint64_t row_bytes,
                     ElementBytes(recipe.TypeOf(config, m), cols, kWhat));
    ASSIGN_OR_RETURN(uint64_t bytes, Mul(rows, row_bytes, kWhat));
    ASSIGN_OR_RETURN(total, Add(total, bytes, kWhat));
    ASSIGN_OR_RETURN(bytes, Mul(rows, cols, kWhat));
    ASSIGN_OR_RETURN(matrix_parameters, Add(matrix_parameters, bytes, kWhat));
  }
  const uint64_t rest = static_cast<uint64_t>(parameters) - matrix_parameters;
  ASSIGN_OR_RETURN(uint64_t rest_bytes, Mul(rest, sizeof(float), kWhat));
  return Add(total, rest_bytes, kWhat);
}

absl::StatusOr<uint64_t> WeightBytes(const ModelConfig& config,
                                     const WeightRecipe& recipe,
                                     int64_t parameters) {
  if (recipe.mix() == WeightMix::kUniform) {
    return ElementBytes(recipe.base_type(), static_cast<uint64_t>(parameters),
                        "weight bytes");
  }
  return MixWeightBytes(config, recipe, parameters);
}

MemoryFit FitInto(uint64_t memory, const MemoryPlan& plan) {
  MemoryFit fit;
  fit.memory_bytes = memory;
  fit.weights_fit = plan.weights_bytes <= memory;
  fit.fits = plan.total_bytes <= memory;
  if (!fit.weights_fit) {
    fit.weights_shortfall_bytes = plan.weights_bytes - memory;
  } else {
    fit.sequences_that_fit = static_cast<int64_t>(
        (memory - plan.weights_bytes) /
        (plan.kv_bytes_per_sequence + plan.state_bytes_per_sequence));
  }
  if (!fit.fits) fit.shortfall_bytes = plan.total_bytes - memory;
  return fit;
}

}  // namespace

absl::StatusOr<GgmlType> ParseKvDtype(absl::string_view name) {
  std::string accepted;
  for (const NamedDtype& d : kKvDtypes) {
    if (d.name == name) return d.type;
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", d.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown KV cache dtype '", name, "' (accepted: ", accepted, ")"));
}

std::string DtypeName(GgmlType type) {
  return absl::AsciiStrToLower(GetGgmlTypeTraits(type).name);
}

absl::StatusOr<uint64_t> GgufTensorBytes(const GgufFile& file) {
  uint64_t total = 0;
  for (const GgufTensorInfo& tensor : file.tensors()) {
    ASSIGN_OR_RETURN(total, Add(total, tensor.size_bytes, "tensor bytes"));
  }
  return total;
}

uint64_t GgufTensorBytesPerToken(const GgufFile& file,
                                 const ModelConfig& config) {
  uint64_t total = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !config.tied_output) continue;
    if (config.is_moe() && absl::EndsWith(t.name, "_exps.weight")) {
      total += t.size_bytes / static_cast<uint64_t>(config.n_expert) *
               static_cast<uint64_t>(config.n_expert_used);
      continue;
    }
    total += t.size_bytes;
  }
  return total;
}

absl::StatusOr<MemoryPlan> PlanMemory(const ModelConfig& config,
                                      const MemoryPlanRequest& request) {
  RETURN_IF_ERROR(CheckRequest(request));
  MemoryPlan plan;
  plan.parameters = config.ParameterCount();
  if (plan.parameters <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model shape has ", plan.parameters, " parameters; expected > 0"));
  }
  plan.active_parameters = config.ActiveParameterCount();
  // One embedding row per token, unless it is the output matrix too.
  const int64_t read_parameters =
      plan.active_parameters -
      (config.tied_output ? 0 : config.n_vocab * config.n_embd);
  if (request.weights_recipe.has_value()) {
    const WeightRecipe& recipe = *request.weights_recipe;
    plan.weights_dtype = recipe.name();
    ASSIGN_OR_RETURN(plan.weights_bytes,
                     WeightBytes(config, recipe, plan.parameters));
    if (recipe.mix() == WeightMix::kUniform) {
      ASSIGN_OR_RETURN(plan.weights_read_bytes_per_token,
                       ElementBytes(recipe.base_type(),
                                    static_cast<uint64_t>(read_parameters),
                                    "weight bytes"));
    } else {  // a mix: its average bits per weight over the read parameters
      plan.weights_read_bytes_per_token = static_cast<uint64_t>(
          static_cast<double>(plan.weights_bytes) * read_parameters /
          plan.parameters);
    }
  } else {
    plan.weights_dtype = "file";
    plan.weights_bytes = *request.weights_file_bytes;
    plan.weights_read_bytes_per_token =
        request.weights_file_bytes_per_token.value_or(static_cast<uint64_t>(
            static_cast<double>(plan.weights_bytes) * read_parameters /
            plan.parameters));
  }
  plan.weights_bits_per_weight = static_cast<double>(plan.weights_bytes) * 8 /
                                 static_cast<double>(plan.parameters);
  plan.kv_dtype = request.kv_type;
  plan.recurrent_layers = config.NumRecurrentLayers();
  plan.attention_layers = config.n_layers - plan.recurrent_layers;
  ASSIGN_OR_RETURN(
      plan.kv_bytes_per_token,
      KvBytesPerToken(config, request.kv_type, plan.attention_layers));
  plan.state_bytes_per_sequence =
      static_cast<uint64_t>(config.RecurrentStateBytes());
  plan.context = request.context;
  plan.sequences = request.sequences;
  ASSIGN_OR_RETURN(plan.kv_bytes_per_sequence_full,
                   Mul(plan.kv_bytes_per_token,
                       static_cast<uint64_t>(request.context), "KV bytes"));
  ASSIGN_OR_RETURN(plan.kv_bytes_per_sequence,
                   KvBytesPerSequence(config, request, &plan));
  ASSIGN_OR_RETURN(plan.kv_bytes,
                   Mul(plan.kv_bytes_per_sequence,
                       static_cast<uint64_t>(request.sequences), "KV bytes"));
  ASSIGN_OR_RETURN(plan.state_bytes,
                   Mul(plan.state_bytes_per_sequence,
                       static_cast<uint64_t>(request.sequences), "state bytes"));
  ASSIGN_OR_RETURN(plan.total_bytes,
                   Add(plan.weights_bytes, plan.kv_bytes, "total bytes"));
  ASSIGN_OR_RETURN(plan.total_bytes,
                   Add(plan.total_bytes, plan.state_bytes, "total bytes"));
  // weights × 1.3 = weights + floor(weights × 3 / 10), without overflowing
  // the intermediate product.
  const uint64_t w = plan.weights_bytes;
  ASSIGN_OR_RETURN(plan.rule_of_thumb_bytes,
                   Add(w, w / 10 * 3 + w % 10 * 3 / 10, "rule-of-thumb bytes"));
  if (request.memory_bytes.has_value()) {
    plan.fit = FitInto(*request.memory_bytes, plan);
  }
  return plan;
}

}  // namespace paceline::engine
