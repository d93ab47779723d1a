#include "server/frontend/tool_call_constraint.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chat/tool_formats/call_writing.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/reasoning_gate.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "engine/sampling/grammar/tool_call_mask.h"

namespace paceline::server {
namespace {

namespace gr = engine::grammar;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// The syntax named `name` (a ToolCallFormatName): the grammar's own, or a
// family's markup; nullopt when no grammar forces it.
std::optional<gr::ToolCallSpec> SyntaxNamed(absl::string_view name) {
  gr::ToolCallSpec spec;
  if (absl::StatusOr<gr::ToolCallSyntax> own = gr::ParseToolCallSyntax(name);
      own.ok()) {
    spec.syntax = *own;
    return spec;
  }
  const std::optional<chat::ToolCallFormat> format =
      chat::ToolCallFormatFromName(name);
  if (!format.has_value()) return std::nullopt;
  std::optional<gr::CallMarkup> markup = ForcedCallMarkup(*format);
  if (!markup.has_value()) return std::nullopt;
  spec.syntax = gr::ToolCallSyntax::kMarkup;
  spec.markup = *std::move(markup);
  return spec;
}

// The call syntax: the request's, else the chat template's; nullopt when
// the template has none a grammar forces.
absl::StatusOr<std::optional<gr::ToolCallSpec>> Syntax(
    const v1::ToolCalls& calls,
    const std::optional<chat::ChatOutputFormat>& chat_output) {
  absl::string_view name = calls.format();
  if (name.empty()) {
    if (!chat_output.has_value()) {
      return Invalid("sampling.constraint.tool_calls.format",
                     "is empty and the input is not chat: name the call "
                     "syntax");
    }
    if (chat_output->tool_calls == chat::ToolCallFormat::kNone) {
      return std::nullopt;
    }
    // A format the parser reads but no grammar forces yet: as if none.
    return SyntaxNamed(chat::ToolCallFormatName(chat_output->tool_calls));
  }
  std::optional<gr::ToolCallSpec> spec = SyntaxNamed(name);
  if (!spec.has_value()) {
    return Invalid("sampling.constraint.tool_calls.format",
                   absl::StrCat("'", name,
                                "' is not a call syntax Paceline can force "
                                "(hermes, llama3, mistral, mistral_args, or "
                                "a chat format with a forced form: "
                                "qwen3_coder, glm, minimax, kimi_k2, ...)"));
  }
  return spec;
}

gr::ToolCallSpec Spec(const v1::ToolCalls& calls, gr::ToolCallSpec spec) {
  spec.mode =
      calls.mode() == v1::ToolCalls::MODE_NAMED  ? gr::ToolCallMode::kNamed
      : calls.mode() == v1::ToolCalls::MODE_AUTO ? gr::ToolCallMode::kAuto
                                                 : gr::ToolCallMode::kRequired;
  spec.parallel = calls.parallel();
  for (const v1::ToolSchema& tool : calls.tools()) {
    spec.tools.push_back({tool.name(), tool.parameters(), tool.strict()});
  }
  return spec;
}

gr::ToolCallMaskOptions MaskOptions(
    const gr::ToolCallSpec& spec,
    const std::optional<chat::ChatOutputFormat>& chat_output,
    const engine::Tokenizer& tokenizer) {
  gr::ToolCallMaskOptions o;
  o.marker_tokens = ControlTokens(tokenizer, gr::ToolCallMarkers(spec));
  if (spec.mode != gr::ToolCallMode::kAuto) return o;
  o.triggers = gr::ToolCallTriggers(spec);
  if (chat_output.has_value() && !chat_output->reasoning_open.empty() &&
      !chat_output->reasoning_close.empty()) {
    o.reasoning_open = chat_output->reasoning_open;
    o.reasoning_close = chat_output->reasoning_close;
    o.starts_in_reasoning = chat_output->starts_in_reasoning;
    o.reasoning_tokens =
        ControlTokens(tokenizer, {o.reasoning_open, o.reasoning_close});
  }
  return o;
}

}  // namespace

std::optional<gr::CallMarkup> ForcedCallMarkup(chat::ToolCallFormat format) {
  std::optional<chat::CallWriting> w = chat::FindCallWriting(format);
  if (!w.has_value()) return std::nullopt;
  gr::CallMarkup m;
  m.xml = w->xml;
  m.section_open = std::move(w->section_open);
  m.list_open = std::move(w->list_open);
  m.call_open = std::move(w->call_open);
  m.call_separator = std::move(w->call_separator);
  m.id_end = std::move(w->id_end);
  m.index_id = w->index_id;
  m.name_prefix = std::move(w->name_prefix);
  m.name_index = w->name_index;
  m.name_end = std::move(w->name_end);
  m.arguments_open = std::move(w->arguments_open);
  m.arguments_close = std::move(w->arguments_close);
  m.parameter_open = std::move(w->parameter_open);
  m.parameter_key_end = std::move(w->parameter_key_end);
  m.string_attrs = std::move(w->string_attrs);
  m.json_attrs = std::move(w->json_attrs);
  m.value_open = std::move(w->value_open);
  m.parameter_close = std::move(w->parameter_close);
  m.call_close = std::move(w->call_close);
  m.section_close = std::move(w->section_close);
  m.newlines = w->newlines;
  m.section_per_call = w->section_per_call;
  m.one_call = w->one_call;
  m.markers = std::move(w->markers);
  return m;
}

std::vector<std::pair<int32_t, std::string>> ControlTokens(
    const engine::Tokenizer& tokenizer, const std::vector<std::string>& texts) {
  std::vector<std::pair<int32_t, std::string>> out;
  for (const std::string& text : texts) {
    if (text.empty()) continue;
    const int32_t id = tokenizer.TokenId(text);
    if (id >= 0 && tokenizer.TokenBytes(id).empty()) out.emplace_back(id, text);
  }
  return out;
}

std::shared_ptr<const engine::TokenMask> AfterReasoning(
    std::shared_ptr<const engine::TokenMask> mask,
    const std::optional<chat::ChatOutputFormat>& chat_output,
    const engine::Tokenizer& tokenizer, const gr::GrammarCache& grammars) {
  if (mask == nullptr || !chat_output.has_value() ||
      chat_output->reasoning_close.empty() ||
      chat_output->prompt_closed_reasoning) {
    return mask;  // no block, or the template closed it: the answer now
  }
  gr::ReasoningMarkers m;
  m.open = chat_output->reasoning_open;
  m.close = chat_output->reasoning_close;
  m.starts_in_reasoning = chat_output->starts_in_reasoning;
  m.tokens = ControlTokens(tokenizer, {m.open, m.close});
  return std::make_shared<gr::ReasoningGate>(grammars.vocab_shared(),
                                             std::move(m), mask->Clone());
}

absl::StatusOr<std::shared_ptr<const engine::TokenMask>> BuildToolCallMask(
    const v1::Constraint& constraint,
    const std::optional<chat::ChatOutputFormat>& chat_output,
    const engine::Tokenizer& tokenizer, const TenantPolicy& tenant,
    gr::GrammarCache& grammars) {
  const v1::ToolCalls& calls = constraint.tool_calls();
  if (calls.tools().empty()) {
    return Invalid("sampling.constraint.tool_calls.tools", "is empty");
  }
  ASSIGN_OR_RETURN(std::optional<gr::ToolCallSpec> syntax,
                   Syntax(calls, chat_output));
  if (!syntax.has_value()) {
    if (calls.mode() == v1::ToolCalls::MODE_AUTO) return nullptr;
    return Invalid("sampling.constraint.tool_calls",
                   "needs a model whose chat template has a tool-call "
                   "format Paceline can force (Hermes/Qwen, Llama 3.x, "
                   "Mistral, Qwen3-Coder XML, GLM, MiniMax, DeepSeek, "
                   "Kimi K2, gpt-oss, ...); this one has none");
  }
  const gr::ToolCallSpec spec = Spec(calls, *std::move(syntax));
  gr::Constraint c;
  c.kind = gr::Constraint::Kind::kToolCalls;
  c.text = gr::ToolCallSpecText(spec);
  c.flexible_whitespace = constraint.flexible_whitespace();
  absl::StatusOr<std::shared_ptr<gr::MaskTables>> tables =
      grammars.Tables(c, tenant.name);
  if (!tables.ok()) {
    return Invalid("sampling.constraint.tool_calls", tables.status().message());
  }
  absl::StatusOr<std::unique_ptr<gr::ToolCallMask>> mask =
      gr::ToolCallMask::Create(*std::move(tables),
                               MaskOptions(spec, chat_output, tokenizer));
  if (!mask.ok()) {
    return Invalid("sampling.constraint.tool_calls", mask.status().message());
  }
  return std::shared_ptr<const engine::TokenMask>(*std::move(mask));
}

}  // namespace paceline::server
