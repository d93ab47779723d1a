// `paceline inspect MODEL [--json]`: what a GGUF model file holds.

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/grpc/proto_convert.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/json_reports.pb.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline inspect MODEL.gguf [--json]\n"
    "\n"
    "Shows a GGUF model file's architecture, hyper-parameters, parameter\n"
    "count, tensor types, file size and tokenizer.\n"
    "\n"
    "  --json   one JSON object instead of the table\n";

constexpr FlagDef kFlags[] = {{"json", false}};

absl::string_view RopeLayoutName(engine::RopeLayout layout) {
  return layout == engine::RopeLayout::kNeoxHalves ? "neox halves"
                                                   : "adjacent pairs";
}

// A tensor's elements one token computes with: a 3-D expert tensor's
// share of the used experts, any other tensor's all.
uint64_t ActiveElements(const engine::GgufTensorInfo& t,
                        const engine::ModelConfig& c) {
  const auto n = static_cast<uint64_t>(t.num_elements());
  if (!c.is_moe() || !absl::EndsWith(t.name, "_exps.weight")) return n;
  return n / static_cast<uint64_t>(c.n_expert) *
         static_cast<uint64_t>(c.n_expert_used);
}

// The biases beyond the usual Q/K/V: "Q/K/V, attention output, ...".
std::string BiasSummary(const engine::ModelConfig& c) {
  std::vector<absl::string_view> parts;
  if (c.qkv_bias) parts.push_back("Q/K/V");
  if (c.attn_output_bias) parts.push_back("attention output");
  if (c.moe_biases) parts.push_back("router, experts");
  return absl::StrJoin(parts, ", ");
}

// "sliding window W on layers a, b, ... (RoPE base B), global on c, ...".
std::string SlidingSummary(const engine::ModelConfig& c) {
  std::vector<int64_t> sliding, global;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    (c.IsSlidingLayer(l) ? sliding : global).push_back(l);
  }
  std::string out = absl::StrCat(
      "sliding window ", c.sliding_window, " on layers ",
      absl::StrJoin(sliding, ", "),
      c.sliding_rope ? absl::StrCat(" (RoPE base ", c.rope_freq_base_swa, ")")
                     : "");
  if (!global.empty()) {
    absl::StrAppend(&out, ", global on ", absl::StrJoin(global, ", "));
  }
  return out;
}

// "Gated DeltaNet on layers a, b, ... (k key / v value heads of d, conv
// K), gated attention on c, ...; state S per sequence".
std::string HybridSummary(const engine::ModelConfig& c) {
  std::vector<int64_t> linear, attention;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    (c.IsRecurrentLayer(l) ? linear : attention).push_back(l);
  }
  return absl::StrCat(
      "Gated DeltaNet (linear) on layers ", absl::StrJoin(linear, ", "), " (",
      c.ssm_k_heads, " key / ", c.ssm_v_heads, " value heads of ",
      c.ssm_state_size, ", ", c.ssm_grouped_heads ? "grouped" : "tiled",
      ", conv ", c.ssm_conv_kernel, "), gated attention on ",
      absl::StrJoin(attention, ", "), "; recurrent state ",
      GroupDigits(static_cast<uint64_t>(c.RecurrentStateBytes())),
      " bytes per sequence");
}

struct Summary {
  const engine::GgufFile* file;
  engine::ModelConfig config;
  const engine::Tokenizer* tokenizer;
  uint64_t parameters = 0;  // elements of all tensors
  // parameters less the unused experts' share of the expert tensors.
  uint64_t active_parameters = 0;
  std::map<std::string, int> type_histogram;  // type name -> tensor count
  bool chat_template = false;
  // Bytes of the 3-D expert tensors, and their types ("MXFP4 x6").
  uint64_t expert_bytes = 0;
  std::string expert_types;
};

void PrintTable(const std::string& path, const Summary& s) {
  const engine::ModelConfig& c = s.config;
  auto row = [](absl::string_view key, absl::string_view value) {
    std::cout << absl::StrFormat("%-14s %s\n", key, value);
  };
  row("file", path);
  row("size", absl::StrCat(GroupDigits(s.file->file_size()), " bytes, ",
                           HumanBytes(s.file->file_size())));
  row("format",
      absl::StrCat("GGUF v", s.file->version(), ", ", s.file->tensors().size(),
                   " tensors, ", s.file->metadata().size(),
                   " metadata keys, alignment ", s.file->alignment()));
  row("architecture", c.architecture);
  if (!c.name.empty()) row("name", c.name);
  row("layers", absl::StrCat(c.n_layers));
  row("embedding", absl::StrCat(c.n_embd));
  row("heads", absl::StrCat(c.n_heads, " (head dim ", c.head_dim, ")"));
  row("kv heads", absl::StrCat(c.n_kv_heads));
  row("ffn", absl::StrCat(c.n_ff));
  row("vocab", absl::StrCat(c.n_vocab));
  row("context", absl::StrCat(c.context_length));
  row("rope", absl::StrCat(RopeLayoutName(c.rope_layout), ", ", c.rope_dim,
                           " dims, base ", c.rope_freq_base));
  if (c.rope_scaling != engine::RopeScaling::kNone) {
    row("rope scaling",
        absl::StrCat(
            c.rope_scaling == engine::RopeScaling::kLinear ? "linear" : "yarn",
            " x", c.rope_scaling_factor,
            c.sliding_rope ? " (global layers)" : ""));
  }
  if (c.sliding_window > 0) row("attention", SlidingSummary(c));
  if (c.NumRecurrentLayers() > 0) row("layer kinds", HybridSummary(c));
  if (c.attn_sinks) row("sinks", "one learned logit per head per layer");
  if (!BiasSummary(c).empty()) row("biases", BiasSummary(c));
  row("rms norm eps", absl::StrCat(c.rms_norm_eps));
  row("output", c.tied_output ? "tied to token embedding" : "separate matrix");
  if (c.is_moe()) {
    row("experts", absl::StrCat(c.n_expert, " per layer, ", c.n_expert_used,
                                " used per token, FFN ", c.n_ff_exp,
                                c.n_ff_shexp > 0
                                    ? absl::StrCat(", a shared expert of ",
                                                   c.n_ff_shexp)
                                    : ""));
    row("expert bytes",
        absl::StrCat(GroupDigits(s.expert_bytes), ", ",
                     HumanBytes(s.expert_bytes), ", ", s.expert_types));
  }
  row("parameters", absl::StrFormat("%s (%.2f M)", GroupDigits(s.parameters),
                                    static_cast<double>(s.parameters) / 1e6));
  if (c.is_moe()) {
    row("active params",
        absl::StrFormat("%s (%.2f M) per token",
                        GroupDigits(s.active_parameters),
                        static_cast<double>(s.active_parameters) / 1e6));
  }
  std::string types;
  for (const auto& [name, count] : s.type_histogram) {
    absl::StrAppend(&types, types.empty() ? "" : ", ", name, " x", count);
  }
  row("tensor types", types);
  row("tokenizer",
      absl::StrCat(s.tokenizer->model(), " (",
                   s.tokenizer->model() == "llama" ? "SentencePiece BPE"
                                                   : "byte-level BPE",
                   s.tokenizer->model() == "llama"
                       ? ""
                       : absl::StrCat(", pre-tokenizer ", s.tokenizer->pre()),
                   "), ", s.tokenizer->vocab_size(), " tokens, BOS ",
                   s.tokenizer->bos_id(), ", EOS ", s.tokenizer->eos_id()));
  row("chat template", s.chat_template ? "yes" : "no");
}

InspectReport ToReport(const std::string& path, const Summary& s) {
  const engine::ModelConfig& c = s.config;
  InspectReport r;
  r.set_file(path);
  r.set_file_size_bytes(s.file->file_size());
  r.set_gguf_version(s.file->version());
  r.set_tensor_count(s.file->tensors().size());
  server::FillModelInfo(c, *s.tokenizer, r.mutable_info());
  r.mutable_info()->set_parameters(static_cast<int64_t>(s.parameters));
  r.set_rope_layout(std::string(RopeLayoutName(c.rope_layout)));
  r.set_rope_dim(c.rope_dim);
  r.set_tied_output(c.tied_output);
  for (const auto& [name, count] : s.type_histogram) {
    (*r.mutable_tensor_types())[name] = count;
  }
  r.set_tokenizer_pre(s.tokenizer->pre());
  r.set_tokenizer_vocab_size(s.tokenizer->vocab_size());
  r.set_chat_template(s.chat_template);
  r.set_experts(c.n_expert);
  r.set_experts_used(c.n_expert_used);
  r.set_expert_feed_forward_length(c.n_ff_exp);
  r.set_active_parameters(static_cast<int64_t>(s.active_parameters));
  r.set_linear_attention_layers(c.NumRecurrentLayers());
  r.set_attention_layers(c.n_layers - c.NumRecurrentLayers());
  r.set_recurrent_state_bytes(static_cast<uint64_t>(c.RecurrentStateBytes()));
  return r;
}

}  // namespace

int RunInspect(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("inspect", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (parsed->positional().size() != 1) {
    return UsageError("inspect", kUsage, "expected exactly one MODEL file");
  }
  const std::string& path = parsed->positional()[0];
  auto file = engine::GgufFile::Open(path);
  if (!file.ok()) return Failure("inspect", file.status());
  auto config = engine::ModelConfigFromGguf(**file);
  if (!config.ok()) return Failure("inspect", config.status());
  auto tokenizer = engine::Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) return Failure("inspect", tokenizer.status());

  Summary summary{.file = file->get(),
                  .config = *std::move(config),
                  .tokenizer = tokenizer->get(),
                  .parameters = 0,
                  .active_parameters = 0,
                  .type_histogram = {},
                  .chat_template = false,
                  .expert_bytes = 0,
                  .expert_types = {}};
  std::map<std::string, int> expert_types;
  for (const engine::GgufTensorInfo& t : (*file)->tensors()) {
    const std::string type(engine::GetGgmlTypeTraits(t.type).name);
    summary.parameters += static_cast<uint64_t>(t.num_elements());
    summary.active_parameters += ActiveElements(t, summary.config);
    ++summary.type_histogram[type];
    if (absl::EndsWith(t.name, "_exps.weight")) {
      summary.expert_bytes += t.size_bytes;
      ++expert_types[type];
    }
  }
  for (const auto& [name, count] : expert_types) {
    absl::StrAppend(&summary.expert_types,
                    summary.expert_types.empty() ? "" : ", ", name, " x",
                    count);
  }
  summary.chat_template = (*file)->Has("tokenizer.chat_template");
  if (parsed->Has("json")) {
    std::cout << MessageToJson(ToReport(path, summary));
  } else {
    PrintTable(path, summary);
  }
  return kExitOk;
}

}  // namespace paceline::tools
