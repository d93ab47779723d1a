#include "server/frontend/tool_call_constraint.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

// The call syntax: the request's, else the chat template's; nullopt when
// the template has none.
absl::StatusOr<std::optional<gr::ToolCallSyntax>> Syntax(
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
    name = chat::ToolCallFormatName(chat_output->tool_calls);
    // A format the parser reads but no grammar forces yet: as if none.
    absl::StatusOr<gr::ToolCallSyntax> syntax = gr::ParseToolCallSyntax(name);
    if (!syntax.ok()) return std::nullopt;
    return *syntax;
  }
  absl::StatusOr<gr::ToolCallSyntax> syntax = gr::ParseToolCallSyntax(name);
  if (!syntax.ok()) {
    return Invalid("sampling.constraint.tool_calls.format",
                   syntax.status().message());
  }
  return *syntax;
}

gr::ToolCallSpec Spec(const v1::ToolCalls& calls, gr::ToolCallSyntax syntax) {
  gr::ToolCallSpec spec;
  spec.syntax = syntax;
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
  o.marker_tokens = ControlTokens(tokenizer, gr::ToolCallMarkers(spec.syntax));
  if (spec.mode != gr::ToolCallMode::kAuto) return o;
  o.triggers = gr::ToolCallTriggers(spec.syntax);
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
  ASSIGN_OR_RETURN(const std::optional<gr::ToolCallSyntax> syntax,
                   Syntax(calls, chat_output));
  if (!syntax.has_value()) {
    if (calls.mode() == v1::ToolCalls::MODE_AUTO) return nullptr;
    return Invalid("sampling.constraint.tool_calls",
                   "needs a model whose chat template has a tool-call "
                   "format Paceline parses (Hermes/Qwen, Llama 3.x, "
                   "Mistral); this one has none");
  }
  const gr::ToolCallSpec spec = Spec(calls, *syntax);
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
