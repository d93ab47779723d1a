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
//   markup        the other families (Qwen3-Coder XML, GLM, MiniMax,
//                 DeepSeek V3.1 / DSML / V4, Kimi K2, Seed-OSS, gpt-oss,
//                 ...): the spec's CallMarkup, below, says how
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
//   markup    see CallMarkup
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

enum class ToolCallSyntax { kHermes, kLlama3, kMistral, kMistralArgs, kMarkup };
enum class ToolCallMode { kRequired, kNamed, kAuto };

// A call syntax given as markup: chat/tool_formats/call_writing.h's
// CallWriting, field for field (the server copies it; this module does not
// see chat/). A call, `gap` an optional "\n" where `newlines`, else none:
//   section_open list_open gap call_open [ID id_end] name_prefix NAME
//   [":" DIGITS] name_end gap BODY call_close gap section_close
// (ID: 9 letters and digits, or 1 to 3 digits where index_id: Command
// R7B's "tool_call_id": "0"; list_open: a JSON array's "[" where the calls
// are JSON objects in one, the rest of the object in the other fields).
// BODY, json: arguments_open A arguments_close; xml: for each of the
// schema's properties in order (the required ones present, the others
// optional), parameter_open KEY parameter_key_end ATTRS [gap value_open]
// VALUE parameter_close gap. A property whose schema has type "string"
// is written raw (VALUE: any text without parameter_close, or one of its
// `enum`/`const` strings with a gap either side; ATTRS string_attrs);
// any other, as JSON valid under its schema (gap VALUE gap; ATTRS
// json_attrs): the parser types the values by the same schemas. A schema
// without "properties" takes any parameters (keys of letters, digits,
// '_', '-', '.'; raw values). A raw value with minLength/maxLength,
// pattern or format holds them as the JSON path does (json_schema.h), on
// the text the parser keeps (it drops one line break at each end): VALUE
// is then CONTENT or, where `newlines`, "\n" CONTENT "\n", CONTENT neither
// starting nor ending with a line break (a pattern's or format's holding
// none) nor holding parameter_close's first character. Once maxLength is
// reached only the closing marker may follow. A keyword
// the JSON path refuses is refused for a strict tool (the message names
// the tool, the property and the keyword); a tool not strict gets any raw
// value there.
// Further calls (parallel, not one_call): each in a section of its own
// when section_per_call or call_open is empty, else call_separator (when
// empty: gap) call_open ... in the one section.
// Where the language starts: required after section_open list_open [gap
// call_open];
// named after that and, when id_end is empty, name_prefix NAME [":0"]
// name_end [gap] too (CallWriting's ForcedCallOpening); auto at
// section_open, the trigger.
struct CallMarkup {
  bool xml = false;
  std::string section_open;  // not empty
  std::string list_open;
  std::string call_open;
  std::string call_separator;
  std::string id_end;
  bool index_id = false;
  std::string name_prefix;
  bool name_index = false;
  std::string name_end;
  std::string arguments_open;
  std::string arguments_close;
  std::string parameter_open;
  std::string parameter_key_end;
  std::string string_attrs;
  std::string json_attrs;
  std::string value_open;
  std::string parameter_close;
  std::string call_close;
  std::string section_close;
  bool newlines = false;
  bool section_per_call = false;
  bool one_call = false;
  std::vector<std::string> markers;  // ToolCallMarkers
};

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
  CallMarkup markup;              // kMarkup only
};

// "hermes", "llama3", "mistral", "mistral_args" (ToolCallFormatName's
// names); InvalidArgument for any other (kMarkup comes with its markup:
// ToolCallSpec, never a name).
absl::StatusOr<ToolCallSyntax> ParseToolCallSyntax(absl::string_view name);
const char* ToolCallSyntaxName(ToolCallSyntax syntax);

// The spec as Constraint::text: canonical JSON, equal for equal specs.
std::string ToolCallSpecText(const ToolCallSpec& spec);

// The grammar of a spec given as ToolCallSpecText. Errors: InvalidArgument
// for a malformed spec (no tools, named with other than one, an empty
// name, a name mistral_args or markup cannot write: only letters, digits,
// '_', '-' and '.'; an xml parameter name with '<', '>', '"', '=' or a
// line break; a markup without section_open, or an xml one whose
// parameter_close starts with a byte it holds again), parameters that are not
// JSON or admit no object; a strict tool's schema error with the compiler's
// code, its message after "tool 'NAME' parameters: ".
absl::StatusOr<Grammar> ToolCallGrammar(absl::string_view spec_text,
                                        const JsonSchemaOptions& json = {});

// The syntax's markers: texts that are single control tokens (no bytes of
// their own) in some vocabularies. ToolCallMask (tool_call_mask.h) allows
// such a token where the grammar reads its text.
std::vector<std::string> ToolCallMarkers(ToolCallSyntax syntax);
std::vector<std::string> ToolCallMarkers(const ToolCallSpec& spec);

// Mode auto: a text that opens a call in the output (the auto grammar
// starts with it); at_content_start: only as the first bytes of the
// content other than whitespace (Llama 3's bare JSON call).
struct CallTrigger {
  std::string text;
  bool at_content_start = false;
};
std::vector<CallTrigger> ToolCallTriggers(ToolCallSyntax syntax);
// markup: its section_open.
std::vector<CallTrigger> ToolCallTriggers(const ToolCallSpec& spec);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_TOOL_CALL_GRAMMAR_H_
