#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_GRAMMAR_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_GRAMMAR_H_

// Tool calls in a chat model's own call syntax, each call's arguments valid
// under its tool's JSON Schema: the grammar of Constraint::Kind::kToolCalls
// (OpenAI's tool_choice "required" or a named function, strict tools).
//
// The syntaxes are chat/output_parser.h's ToolCallFormat values, written as
// the models' chat templates write a call (N: the tool's name as a JSON
// string, A: the arguments, a JSON object; ID: 9 letters and digits):
//   hermes        <tool_call>\n{"name": N, "arguments": A}\n</tool_call>
//                 (further calls each after "\n")
//   llama3        {"name": N, "parameters": A}, <|python_tag|> before it
//                 optional (the templates take one call)
//   mistral       [TOOL_CALLS][{"name": N, "arguments": A, "id": ID}]
//                 (the id optional; further calls after ", " in the array)
//   mistral_args  [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]A (NAME unquoted,
//                 [CALL_ID]ID optional; further calls each after
//                 [TOOL_CALLS])
// Whitespace outside A is exactly as above; inside A it is the JSON
// options' (compact: at most one space after ',' and ':', as Python's
// json.dumps and the templates' tojson write).
//
// Where the language starts depends on the mode. Required and named: after
// the call's opening, which the server has written into the prompt (an
// assistant prefill):
//   required  hermes `<tool_call>\n`, llama3 `{"name": "`,
//             mistral and mistral_args `[TOOL_CALLS]`
//   named     hermes `<tool_call>\n{"name": N, "arguments": `,
//             llama3 `{"name": N, "parameters": `,
//             mistral `[TOOL_CALLS][{"name": N, "arguments": `,
//             mistral_args `[TOOL_CALLS]NAME[ARGS]`
// Auto: at the opening (a trigger, below), which follows free text
// (tool_call_mask.h). Named takes exactly one call of its one tool;
// required and auto one call of any tool, more with `parallel` where the
// syntax has a way. After the last call the language ends: only end of
// generation may follow.
//
// Arguments: a tool's schema is held to an object (a missing `type`
// becomes "object", a list of types is narrowed to it); no schema: any
// JSON object. A strict tool's schema that the JSON Schema compiler
// refuses is an error naming the tool; a non-strict tool's then takes any
// JSON object (OpenAI promises nothing more for non-strict tools).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/json_schema.h"

namespace paceline::engine::grammar {

enum class ToolCallSyntax { kHermes, kLlama3, kMistral, kMistralArgs };
enum class ToolCallMode { kRequired, kNamed, kAuto };

struct ToolSchema {
  std::string name;        // not empty
  std::string parameters;  // JSON Schema text; "": any JSON object
  bool strict = false;
};

struct ToolCallSpec {
  ToolCallSyntax syntax = ToolCallSyntax::kHermes;
  ToolCallMode mode = ToolCallMode::kRequired;
  bool parallel = false;
  std::vector<ToolSchema> tools;  // at least one; exactly one for kNamed
};

// "hermes", "llama3", "mistral", "mistral_args" (ToolCallFormatName's
// names); InvalidArgument for any other.
absl::StatusOr<ToolCallSyntax> ParseToolCallSyntax(absl::string_view name);
const char* ToolCallSyntaxName(ToolCallSyntax syntax);

// The spec as Constraint::text: canonical JSON, equal for equal specs.
std::string ToolCallSpecText(const ToolCallSpec& spec);

// The grammar of a spec given as ToolCallSpecText. Errors: InvalidArgument
// for a malformed spec (no tools, named with other than one, an empty
// name, a name mistral_args cannot write: only letters, digits, '_', '-'
// and '.'), parameters that are not JSON or admit no object; a strict
// tool's schema error with the compiler's code, its message after
// "tool 'NAME' parameters: ".
absl::StatusOr<Grammar> ToolCallGrammar(absl::string_view spec_text,
                                        const JsonSchemaOptions& json = {});

// The syntax's markers: texts that are single control tokens (no bytes of
// their own) in some vocabularies. ToolCallMask (tool_call_mask.h) allows
// such a token where the grammar reads its text.
std::vector<std::string> ToolCallMarkers(ToolCallSyntax syntax);

// Mode auto: a text that opens a call in the output (the auto grammar
// starts with it); at_content_start: only as the first bytes of the
// content other than whitespace (Llama 3's bare JSON call).
struct CallTrigger {
  std::string text;
  bool at_content_start = false;
};
std::vector<CallTrigger> ToolCallTriggers(ToolCallSyntax syntax);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_GRAMMAR_H_
