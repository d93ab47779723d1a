#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MARKUP_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MARKUP_H_

// Internal to tool_call_grammar.cc: the language of a kMarkup spec
// (tool_call_grammar.h's CallMarkup describes it), and the spec's markup
// as JSON for ToolCallSpecText.

#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "nlohmann/json.hpp"

namespace paceline::engine::grammar::internal {

// The arguments' schema held to an object (tool_call_grammar.h).
absl::StatusOr<nlohmann::ordered_json> ToolObjectSchema(
    const ToolSchema& tool, const JsonSchemaOptions& json);

// The spec's body after the mode's opening (auto: from section_open on),
// added to `g`. `json_args[i]`: tool i's arguments object when the markup
// is not xml (unused otherwise).
absl::StatusOr<ExprId> MarkupLanguage(Grammar* g, const ToolCallSpec& spec,
                                      const std::vector<ExprId>& json_args,
                                      const JsonSchemaOptions& json);

// Checks what the markup's grammar needs of the spec (see ToolCallGrammar).
absl::Status CheckMarkup(const ToolCallSpec& spec);

nlohmann::ordered_json MarkupToJson(const CallMarkup& m);
// False when `j` is not a markup object.
bool MarkupFromJson(const nlohmann::json& j, CallMarkup* m);

}  // namespace paceline::engine::grammar::internal

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_MARKUP_H_
