#ifndef PACELINE_CHAT_TOOL_FORMATS_CALL_WRITING_H_
#define PACELINE_CHAT_TOOL_FORMATS_CALL_WRITING_H_

// How a forced tool call (OpenAI tool_choice "required" or a named
// function) is written in a family of tool_syntax.h, or gpt-oss harmony:
// the markers as the templates write them. The server writes the call's
// opening into the prompt (ForcedCallOpening) and the grammar
// (engine/sampling/grammar/tool_call_grammar.h's CallMarkup, the same
// fields) holds the rest, so the model writes what the parser reads.
//
// A call, `gap` being an optional "\n" where `newlines` (else nothing):
//   section_open list_open gap call_open [ID id_end] name_prefix NAME
//   [":" DIGITS] name_end gap BODY call_close gap section_close
// BODY, kJsonArguments: arguments_open A arguments_close (A: a JSON object);
// kXmlParameters: per parameter, parameter_open KEY parameter_key_end
// (string_attrs or json_attrs) [gap value_open] VALUE parameter_close gap.
// The JSON call objects (kJsonCall) are written the same way: the object's
// text around the name and the arguments in call_open, name_end and
// call_close (`{"name": "`, `", "arguments": `, `}`), the array's in
// list_open, call_separator and section_close.
// Further calls: a new section each (`section_per_call`, or no call_open),
// else call_separator (empty: gap) call_open ... inside the one section;
// `one_call`: none (harmony's call ends the message, GigaChat's template
// writes one).

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "chat/tool_formats/tool_call_format.h"
#include "chat/tool_formats/tool_syntax.h"

namespace paceline::chat {

struct CallWriting {
  bool xml = false;  // CallBody::kXmlParameters, else kJsonArguments
  std::string section_open;
  std::string list_open;  // once after section_open: a JSON array's "["
  std::string call_open;
  std::string call_separator;  // between calls in a section; "": gap
  // Not empty: an id first, 9 letters and digits, or the call's index
  // (1 to 3 digits) where index_id.
  std::string id_end;
  bool index_id = false;
  std::string name_prefix;
  bool name_index = false;  // Kimi's `:IDX` after the name
  std::string name_end;
  std::string arguments_open;
  std::string arguments_close;
  std::string parameter_open;
  std::string parameter_key_end;
  // After the key: DeepSeek's ` string="true">` for a string value and
  // ` string="false">` for JSON; "" for the others.
  std::string string_attrs;
  std::string json_attrs;
  std::string value_open;
  std::string parameter_close;
  std::string call_close;
  std::string section_close;
  bool newlines = false;
  bool section_per_call = false;
  bool one_call = false;
  // The texts that may be single control tokens (ToolCallMarkers).
  std::vector<std::string> markers;
};

// The writing of `format`'s calls; nullopt for kNone and the formats
// written elsewhere (hermes, llama3, the Mistral ones: server/openai's
// prefix and tool_call_grammar.h's own syntaxes).
std::optional<CallWriting> FindCallWriting(ToolCallFormat format);

// What the server writes before the model's output: section_open,
// list_open, "\n" when newlines and call_open is not empty, call_open
// (section_open left out where the prompt already ends with it:
// functionary v3.2's generation prompt ends with its `>>>`); then, for a named
// call (`name` not empty) whose calls have no id, name_prefix NAME
// (":0" for name_index) name_end and "\n" when newlines.
std::string ForcedCallOpening(const CallWriting& writing,
                              absl::string_view name,
                              bool prompt_opened_section = false);

// Whether a named call's opening holds its name (the calls have no id).
inline bool OpeningHoldsName(const CallWriting& writing) {
  return writing.id_end.empty();
}

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_TOOL_FORMATS_CALL_WRITING_H_
