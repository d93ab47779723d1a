#ifndef PACELINE_SERVER_FRONTEND_TOOL_CALL_CONSTRAINT_H_
#define PACELINE_SERVER_FRONTEND_TOOL_CALL_CONSTRAINT_H_

// sampling.constraint.tool_calls (paceline.proto ToolCalls) -> the grammar
// engine's tool-call constraint (tool_call_grammar.h) and its token mask
// (tool_call_mask.h): the call syntax is the request's, else its chat
// template's; the syntax's marker tokens are looked up in the vocabulary;
// a lazy (auto) mask watches for the syntax's triggers outside the
// template's reasoning. Part of request_builder.h's sampling step.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/output_parser.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "engine/sampling/token_mask.h"
#include "engine/tokenizer/tokenizer.h"
#include "paceline/v1/paceline.pb.h"
#include "server/frontend/tenant_policy.h"

namespace paceline::server {

// The mask prototype of `c` (its tool_calls set), compiled (or cached)
// for `tenant`; null
// when it constrains nothing: mode auto on a chat template without a call
// syntax Paceline parses (no call can be parsed, so none needs holding).
// `chat_output` is the chat input's output format (nullopt for text and
// token ids). Errors are InvalidArgument naming the field: no tools, no
// syntax given and none from the template, an unknown syntax, and the
// compile's errors as "sampling.constraint.tool_calls <message>".
absl::StatusOr<std::shared_ptr<const engine::TokenMask>> BuildToolCallMask(
    const v1::Constraint& c,
    const std::optional<chat::ChatOutputFormat>& chat_output,
    const engine::Tokenizer& tokenizer, const TenantPolicy& tenant,
    engine::grammar::GrammarCache& grammars);

// The grammar's markup for `format`'s forced calls
// (chat/tool_formats/call_writing.h's CallWriting, copied field for field);
// nullopt for the formats without one.
std::optional<engine::grammar::CallMarkup> ForcedCallMarkup(
    chat::ToolCallFormat format);

// Control tokens (no bytes of their own) among `texts`, each with its
// text: markers the output parser reads as text.
std::vector<std::pair<int32_t, std::string>> ControlTokens(
    const engine::Tokenizer& tokenizer, const std::vector<std::string>& texts);

// A constraint for the answer of a reasoning model: `mask` behind the
// chat template's reasoning block (reasoning_gate.h), or `mask` itself
// when the input is not chat, the template has no reasoning markers, or
// the prompt closed the block (thinking off: the answer comes at once).
std::shared_ptr<const engine::TokenMask> AfterReasoning(
    std::shared_ptr<const engine::TokenMask> mask,
    const std::optional<chat::ChatOutputFormat>& chat_output,
    const engine::Tokenizer& tokenizer,
    const engine::grammar::GrammarCache& grammars);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_TOOL_CALL_CONSTRAINT_H_
