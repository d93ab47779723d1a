#ifndef PACELINE_CHAT_TOOL_FORMATS_TOOL_SYNTAX_H_
#define PACELINE_CHAT_TOOL_FORMATS_TOOL_SYNTAX_H_

// A family of tool-call markup as data: the markers around the calls, where
// the name (and an id) is, and how the arguments are written. One engine
// (markup_reader.h) reads every family described here. Whitespace between
// two markers is always allowed and dropped.

#include "absl/strings/string_view.h"
#include "chat/tool_formats/tool_call_format.h"

namespace paceline::chat {

enum class CallBody {
  // JSON call objects (`{"name": ..., "arguments": {...}}`, the keys
  // call_scanner.h accepts), in a JSON array when `array`.
  kJsonCall,
  // The name in the call's header, then the arguments as a JSON object.
  kJsonArguments,
  // The name in the call's header, then XML parameters.
  kXmlParameters,
};

struct ToolSyntax {
  ToolCallFormat format = ToolCallFormat::kNone;
  CallBody body = CallBody::kJsonArguments;
  // The marker that opens the calls in content (a section, or a call when
  // the calls have no section: then it is call_open).
  absl::string_view section_open;
  // Closes the section (optional: the calls may simply end).
  absl::string_view section_close;
  // kJsonCall: literal before the array (Command R+'s "```json"), and
  // whether the calls are a JSON array (else one object per section).
  absl::string_view array_prefix;
  bool array = false;
  // Opens each call inside the section; empty when section_open is it.
  absl::string_view call_open;
  // When not empty, the call's id comes first, up to this marker.
  absl::string_view id_end;
  // The name: after name_prefix (dropped when present), up to name_end
  // (not consumed when name_end_kept), whitespace around it trimmed.
  absl::string_view name_prefix;
  absl::string_view name_end;
  bool name_end_kept = false;
  // Kimi's `functions.NAME:IDX`: the `:IDX` dropped.
  bool name_has_index = false;
  // A "call" of this name opens content instead (functionary's `>>>all`).
  absl::string_view content_name;
  // kJsonArguments: literals around the JSON object (R1's fenced block).
  absl::string_view arguments_open;
  absl::string_view arguments_close;
  // kXmlParameters: parameter_open KEY parameter_key_end [ATTRS
  // parameter_attrs_end] [value_open] VALUE parameter_close.
  absl::string_view parameter_open;
  absl::string_view parameter_key_end;
  absl::string_view parameter_attrs_end;
  absl::string_view value_open;
  absl::string_view parameter_close;
  // Ends each call (kJsonArguments, kXmlParameters). A JSON call that
  // lacks it is still a call; an XML call must end with it.
  absl::string_view call_close;
  // How the templates write calls (what forced calls write, call_writing.h;
  // the reader needs neither): "\n" between markers, and each call in a
  // section of its own.
  bool newlines = false;
  bool section_per_call = false;
};

// The description of `format`; null for the formats read elsewhere (none,
// hermes, llama3, the Mistral ones, gpt-oss).
const ToolSyntax* FindToolSyntax(ToolCallFormat format);

// The format whose markers `template_source` holds, among those of the
// table (the order of the table decides between several); kNone if none.
ToolCallFormat DetectToolSyntax(absl::string_view template_source);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_TOOL_FORMATS_TOOL_SYNTAX_H_
