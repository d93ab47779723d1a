// `paceline plan`: weight and KV-cache memory for a model and a load, and
// how many sequences fit in a memory budget (engine/memory_plan.h).

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weight_recipe.h"
#include "paceline/v1/model.pb.h"
#include "server/grpc/proto_convert.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/json_reports.pb.h"

namespace paceline::tools {
namespace {

constexpr absl::string_view kCommand = "plan";

constexpr absl::string_view kUsage =
    R"(usage: paceline plan --model MODEL --context N --sequences N [flags]

Plans memory for serving MODEL: the weight bytes, the KV-cache bytes for
--sequences sequences of --context tokens each, their total next to the
rule of thumb (weights x 1.3), and, given --memory, how many sequences of
that context fit in the budget. A mixture-of-experts model holds every
expert; its table also shows the active parameters and the weight bytes a
decode step of one sequence reads (the experts one token runs). A model
with sliding-window layers (Gemma 3) counts what the CPU engine keeps:
those layers' last window of positions only (about window / 16 + 1
blocks of 16 tokens per decoding sequence), next to every layer's full
history.

  --model MODEL          a GGUF file, or dummy:SHAPE[:DTYPE] for a named shape
  --context N            tokens per sequence
  --sequences N          concurrent sequences
  --weights-dtype DTYPE  f32, f16, bf16, q8_0, q6_k, q5_k, q4_k, q4_0, q3_k
                         (every matrix in that type), or llama.cpp's mixes
                         q5_k_m, q4_k_m, q3_k_m, q2_k (default: a file's own
                         tensor bytes; f16 for a dummy shape without DTYPE)
  --kv-dtype DTYPE       f32, f16, bf16 or q8_0 (default f16)
  --memory BYTES         budget: 24GiB, 16GB, 512MiB, 1e9, plain bytes
  --json                 print one JSON object instead of the table
)";

constexpr FlagDef kFlags[] = {
    {"model", true},         {"context", true},  {"sequences", true},
    {"weights-dtype", true}, {"kv-dtype", true}, {"memory", true},
    {"json", false},
};

// What was asked for, once the command line is valid.
struct PlanArgs {
  std::string model;
  int64_t context = 0;
  int64_t sequences = 0;
  std::optional<engine::WeightRecipe> weights_recipe;
  engine::GgmlType kv_type = engine::GgmlType::kF16;
  std::optional<uint64_t> memory_bytes;
  bool json = false;
};

struct PlanModel {
  engine::ModelConfig config;
  std::optional<engine::WeightRecipe> spec_weights;  // dummy:SHAPE:DTYPE
  std::optional<uint64_t> file_tensor_bytes;         // a GGUF file's
  std::optional<uint64_t> file_bytes_per_token;  // GgufTensorBytesPerToken
};

// Checks the command line; the error is a message for UsageError.
absl::StatusOr<PlanArgs> ParsePlanArgs(const ParsedArgs& parsed) {
  if (!parsed.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed.positional()[0], "'"));
  }
  for (absl::string_view flag : {"model", "context", "sequences"}) {
    if (!parsed.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is required"));
    }
  }
  PlanArgs args;
  args.model = *parsed.Get("model");
  if (args.model.empty()) {
    return absl::InvalidArgumentError("--model must not be empty");
  }
  constexpr IntRange kPositive = {.min = 1};
  ASSIGN_OR_RETURN(args.context,
                   ParseIntFlag("context", *parsed.Get("context"), kPositive));
  ASSIGN_OR_RETURN(
      args.sequences,
      ParseIntFlag("sequences", *parsed.Get("sequences"), kPositive));
  if (std::optional<std::string> v = parsed.Get("weights-dtype")) {
    absl::StatusOr<engine::WeightRecipe> recipe = engine::ParseWeightsDtype(*v);
    if (!recipe.ok()) return ForFlag("weights-dtype", recipe.status());
    args.weights_recipe = *recipe;
  }
  if (std::optional<std::string> v = parsed.Get("kv-dtype")) {
    absl::StatusOr<engine::GgmlType> type = engine::ParseKvDtype(*v);
    if (!type.ok()) return ForFlag("kv-dtype", type.status());
    args.kv_type = *type;
  }
  ASSIGN_OR_RETURN(args.memory_bytes, GetByteSizeFlag(parsed, "memory"));
  args.json = parsed.Has("json");
  return args;
}

absl::StatusOr<PlanModel> LoadModel(const std::string& model) {
  PlanModel out;
  if (engine::IsDummyModelSpec(model)) {
    absl::StatusOr<engine::DummyModelSpec> spec =
        engine::ParseDummyModelSpec(model);
    if (!spec.ok()) return spec.status();
    out.config = std::move(spec->config);
    out.spec_weights = spec->weights_recipe;
    return out;
  }
  absl::StatusOr<std::unique_ptr<engine::GgufFile>> file =
      engine::GgufFile::Open(model);
  if (!file.ok()) {
    if (absl::StrContains(file.status().message(), model)) return file.status();
    return absl::Status(file.status().code(),
                        absl::StrCat(model, ": ", file.status().message()));
  }
  absl::StatusOr<engine::ModelConfig> config =
      engine::ModelConfigFromGguf(**file);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(model, ": ", config.status().message()));
  }
  out.config = *std::move(config);
  absl::StatusOr<uint64_t> bytes = engine::GgufTensorBytes(**file);
  if (!bytes.ok()) return bytes.status();
  out.file_tensor_bytes = *bytes;
  out.file_bytes_per_token = engine::GgufTensorBytesPerToken(**file, out.config);
  return out;
}

int64_t HeadDim(const engine::ModelConfig& c) {
  if (c.head_dim > 0 || c.n_heads <= 0) return c.head_dim;
  return c.n_embd / c.n_heads;
}

// "6,738,415,616 (6.74 billion)", "292,800 (292.80 thousand)".
std::string HumanCount(int64_t n) {
  const double v = static_cast<double>(n);
  if (v >= 1e9)
    return absl::StrFormat("%s (%.2f billion)", GroupDigits(n), v / 1e9);
  if (v >= 1e6)
    return absl::StrFormat("%s (%.2f million)", GroupDigits(n), v / 1e6);
  if (v >= 1e3)
    return absl::StrFormat("%s (%.2f thousand)", GroupDigits(n), v / 1e3);
  return GroupDigits(n);
}

// "13.48 GB" / "12.55 GiB": the largest unit that keeps the value >= 1.
std::string HumanBytes(uint64_t bytes, bool binary) {
  static constexpr absl::string_view kDecimal[] = {"B",  "kB", "MB", "GB",
                                                   "TB", "PB", "EB"};
  static constexpr absl::string_view kBinary[] = {"B",   "KiB", "MiB", "GiB",
                                                  "TiB", "PiB", "EiB"};
  const double base = binary ? 1024.0 : 1000.0;
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= base && unit + 1 < std::size(kDecimal)) {
    value /= base;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%.2f %s", value,
                         binary ? kBinary[unit] : kDecimal[unit]);
}

// An aligned two-column table whose byte rows have three right-aligned
// cells: decimal units, binary units, exact bytes.
class Table {
 public:
  void Text(std::string label, std::string text) {
    rows_.push_back({std::move(label), {std::move(text)}, false});
  }
  void Bytes(std::string label, uint64_t bytes) {
    rows_.push_back({std::move(label),
                     {HumanBytes(bytes, false), HumanBytes(bytes, true),
                      absl::StrCat(GroupDigits(bytes), " bytes")},
                     true});
  }
  std::string Render() const {
    size_t label_width = 0;
    size_t widths[3] = {0, 0, 0};
    for (const Row& row : rows_) {
      label_width = std::max(label_width, row.label.size());
      if (!row.bytes) continue;
      for (size_t i = 0; i < 3; ++i) {
        widths[i] = std::max(widths[i], row.cells[i].size());
      }
    }
    std::string out;
    for (const Row& row : rows_) {
      absl::StrAppend(&out, row.label,
                      std::string(label_width + 2 - row.label.size(), ' '));
      if (!row.bytes) {
        absl::StrAppend(&out, row.cells[0], "\n");
        continue;
      }
      for (size_t i = 0; i < 3; ++i) {
        absl::StrAppend(&out, i > 0 ? "   " : "",
                        std::string(widths[i] - row.cells[i].size(), ' '),
                        row.cells[i]);
      }
      out += "\n";
    }
    return out;
  }

 private:
  struct Row {
    std::string label;
    std::vector<std::string> cells;
    bool bytes;
  };
  std::vector<Row> rows_;
};

std::string Sequences(int64_t n) {
  return absl::StrCat(n, n == 1 ? " sequence" : " sequences");
}

std::string FormatTable(const PlanArgs& args, const engine::ModelConfig& c,
                        const engine::MemoryPlan& plan) {
  Table t;
  const bool named = !c.name.empty() && !engine::IsDummyModelSpec(args.model);
  t.Text("model",
         absl::StrCat(args.model, " (", c.architecture,
                      named ? absl::StrCat(", \"", c.name, "\"") : "", ")"));
  t.Text("shape",
         absl::StrCat(c.n_layers, " layers, width ", c.n_embd, ", ", c.n_heads,
                      " heads, ", c.n_kv_heads, " KV heads x ", HeadDim(c),
                      ", trained context ", c.context_length));
  t.Text("parameters", HumanCount(plan.parameters));
  if (c.is_moe()) {
    t.Text("experts",
           absl::StrCat(c.n_expert, " per layer, ", c.n_expert_used,
                        " used per token, FFN ", c.n_ff_exp,
                        c.n_ff_shexp > 0
                            ? absl::StrCat(", a shared expert of ", c.n_ff_shexp)
                            : ""));
    t.Text("active parameters", HumanCount(plan.active_parameters));
  }
  t.Bytes(absl::StrCat("weights (", plan.weights_dtype, ")"),
          plan.weights_bytes);
  t.Text("bits per weight",
         absl::StrFormat("%.3f", plan.weights_bits_per_weight));
  if (c.is_moe()) {
    t.Bytes("weights read per token", plan.weights_read_bytes_per_token);
  }
  if (plan.recurrent_layers > 0) {
    t.Text("layer kinds",
           absl::StrCat(plan.recurrent_layers, " Gated DeltaNet (no KV), ",
                        plan.attention_layers, " attention"));
    t.Bytes("state per sequence", plan.state_bytes_per_sequence);
  }
  t.Bytes(absl::StrCat("KV per token (", engine::DtypeName(plan.kv_dtype), ")"),
          plan.kv_bytes_per_token);
  if (plan.kv_groups > 1) {
    // Sliding layers' blocks beyond the window go back to the pool (the
    // CPU engine; the CUDA engine keeps every layer's full history).
    t.Text("KV groups",
           absl::StrCat(plan.kv_groups, " of ", plan.kv_slots,
                        " layers; sliding layers keep their last ",
                        c.sliding_window, " positions"));
    t.Bytes(absl::StrCat("KV per sequence (", plan.context, " tokens)"),
            plan.kv_bytes_per_sequence);
    t.Bytes("KV per sequence, full history", plan.kv_bytes_per_sequence_full);
  }
  t.Bytes(absl::StrCat("KV (", plan.context, " tokens x ",
                       Sequences(plan.sequences), ")"),
          plan.kv_bytes);
  if (plan.recurrent_layers > 0) {
    t.Bytes(absl::StrCat("state (", Sequences(plan.sequences), ")"),
            plan.state_bytes);
    t.Bytes("total (weights + KV + state)", plan.total_bytes);
  } else {
    t.Bytes("total (weights + KV)", plan.total_bytes);
  }
  t.Bytes("rule of thumb (weights x 1.3)", plan.rule_of_thumb_bytes);
  if (plan.fit.has_value()) {
    const engine::MemoryFit& fit = *plan.fit;
    t.Bytes("memory budget", fit.memory_bytes);
    if (!fit.weights_fit) {
      t.Text("fits", "no: the weights alone do not fit");
      t.Bytes("weights over budget by", fit.weights_shortfall_bytes);
    } else if (fit.fits) {
      t.Text("fits",
             absl::StrCat("yes: room for ", Sequences(fit.sequences_that_fit),
                          " of ", plan.context, " tokens"));
    } else {
      t.Text(
          "fits",
          absl::StrCat("no: room for ", Sequences(fit.sequences_that_fit),
                       " of ", plan.context, " tokens, not ", plan.sequences));
      t.Bytes("total over budget by", fit.shortfall_bytes);
    }
  }
  if (c.context_length > 0 && plan.context > c.context_length) {
    t.Text("note", absl::StrCat("context ", plan.context,
                                " is beyond the model's trained context ",
                                c.context_length));
  }
  return t.Render();
}

PlanReport ToReport(const PlanArgs& args, const engine::ModelConfig& c,
                    const engine::MemoryPlan& plan) {
  PlanReport r;
  r.set_model(args.model);
  v1::ModelInfo& info = *r.mutable_info();
  info.set_architecture(c.architecture);
  info.set_name(c.name);
  info.set_layers(c.n_layers);
  info.set_embedding_length(c.n_embd);
  info.set_heads(c.n_heads);
  info.set_kv_heads(c.n_kv_heads);
  info.set_head_dim(HeadDim(c));
  info.set_feed_forward_length(c.n_ff);
  info.set_vocab_size(c.n_vocab);
  info.set_context_length(c.context_length);
  info.set_rope_freq_base(c.rope_freq_base);
  info.set_rms_norm_eps(c.rms_norm_eps);
  info.set_parameters(plan.parameters);
  server::FillMemoryPlan(plan, r.mutable_memory_plan());
  r.set_active_parameters(plan.active_parameters);
  r.set_weights_read_bytes_per_token(plan.weights_read_bytes_per_token);
  r.set_experts(c.n_expert);
  r.set_experts_used(c.n_expert_used);
  if (plan.fit.has_value()) {
    MemoryFit& fit = *r.mutable_fit();
    fit.set_fits(plan.fit->fits);
    fit.set_shortfall_bytes(plan.fit->shortfall_bytes);
    fit.set_weights_fit(plan.fit->weights_fit);
    fit.set_weights_shortfall_bytes(plan.fit->weights_shortfall_bytes);
  }
  return r;
}

}  // namespace

int RunPlan(std::span<const std::string> argv) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(argv, kFlags);
  if (!parsed.ok()) {
    return UsageError(kCommand, kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  absl::StatusOr<PlanArgs> args = ParsePlanArgs(*parsed);
  if (!args.ok()) return UsageError(kCommand, kUsage, args.status().message());

  absl::StatusOr<PlanModel> model = LoadModel(args->model);
  if (!model.ok()) return Failure(kCommand, model.status());

  engine::MemoryPlanRequest request;
  request.kv_type = args->kv_type;
  request.context = args->context;
  request.sequences = args->sequences;
  request.memory_bytes = args->memory_bytes;
  if (args->weights_recipe.has_value()) {
    request.weights_recipe = args->weights_recipe;
  } else if (model->spec_weights.has_value()) {
    request.weights_recipe = model->spec_weights;
  } else if (model->file_tensor_bytes.has_value()) {
    request.weights_file_bytes = model->file_tensor_bytes;
    request.weights_file_bytes_per_token = model->file_bytes_per_token;
  } else {
    request.weights_recipe =
        engine::WeightRecipe::Uniform(engine::GgmlType::kF16);
  }
  absl::StatusOr<engine::MemoryPlan> plan =
      engine::PlanMemory(model->config, request);
  if (!plan.ok()) return Failure(kCommand, plan.status());

  std::cout << (args->json
                    ? MessageToJson(ToReport(*args, model->config, *plan))
                    : FormatTable(*args, model->config, *plan));
  return kExitOk;
}

}  // namespace paceline::tools
