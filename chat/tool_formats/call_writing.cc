#include "chat/tool_formats/call_writing.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace paceline::chat {
namespace {

// gpt-oss, as its template writes a call after the prompt's
// `<|start|>assistant`: ` to=functions.NAME<|channel|>commentary json
// <|message|>{...}<|call|>`.
CallWriting Harmony() {
  CallWriting w;
  w.section_open = " to=";
  w.name_prefix = "functions.";
  w.name_end = "<|channel|>commentary json<|message|>";
  w.call_close = "<|call|>";
  w.one_call = true;
  w.markers = {"<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"};
  return w;
}

CallWriting FromSyntax(const ToolSyntax& s) {
  CallWriting w;
  w.xml = s.body == CallBody::kXmlParameters;
  w.section_open = std::string(s.section_open);
  w.call_open = std::string(s.call_open);
  w.id_end = std::string(s.id_end);
  w.name_prefix = std::string(s.name_prefix);
  w.name_index = s.name_has_index;
  if (!s.name_end_kept) w.name_end = std::string(s.name_end);
  w.arguments_open = std::string(s.arguments_open);
  w.arguments_close = std::string(s.arguments_close);
  w.parameter_open = std::string(s.parameter_open);
  w.parameter_key_end = std::string(s.parameter_key_end);
  if (!s.parameter_attrs_end.empty()) {
    w.string_attrs = absl::StrCat(" string=\"true\"", s.parameter_attrs_end);
    w.json_attrs = absl::StrCat(" string=\"false\"", s.parameter_attrs_end);
  }
  w.value_open = std::string(s.value_open);
  w.parameter_close = std::string(s.parameter_close);
  w.call_close = std::string(s.call_close);
  w.section_close = std::string(s.section_close);
  w.newlines = s.newlines;
  w.section_per_call = s.section_per_call;
  for (absl::string_view m :
       {s.section_open, s.section_close, s.call_open, s.id_end, s.name_end,
        s.parameter_open, s.parameter_key_end, s.value_open, s.parameter_close,
        s.call_close}) {
    if (!m.empty()) w.markers.emplace_back(m);
  }
  return w;
}

// JSON call objects `{"name": "NAME", "arguments": A}` after `open`, in
// an array (`[`, ", " between, `]` then `close`) unless `one`: the
// writing of Apriel, Nemotron v2, Granite, firefunction and GigaChat
// (json.dumps's spacing, as their templates or system prompts write them).
CallWriting JsonCallObjects(absl::string_view open, absl::string_view close,
                            bool one) {
  CallWriting w;
  w.section_open = std::string(open);
  w.call_open = "{\"name\": \"";
  w.name_end = "\", \"arguments\": ";
  w.call_close = "}";
  if (one) {
    w.section_close = std::string(close);
    w.one_call = true;
  } else {
    w.list_open = "[";
    w.call_separator = ", ";
    w.section_close = absl::StrCat("]", close);
  }
  w.markers.emplace_back(open);
  if (!close.empty()) w.markers.emplace_back(close);
  return w;
}

// Command R7B: `<|START_ACTION|>[` then, each on a line indented by four,
// `{"tool_call_id": "0", "tool_name": "NAME", "parameters": A}`, then
// `]<|END_ACTION|>` on a line of its own.
CallWriting CommandR7b() {
  CallWriting w;
  w.section_open = "<|START_ACTION|>";
  w.list_open = "[\n    ";
  w.call_open = "{\"tool_call_id\": \"";
  w.index_id = true;
  w.id_end = "\", \"tool_name\": \"";
  w.name_end = "\", \"parameters\": ";
  w.call_close = "}";
  w.call_separator = ",\n    ";
  w.section_close = "\n]<|END_ACTION|>";
  w.markers = {"<|START_ACTION|>", "<|END_ACTION|>"};
  return w;
}

// Command R+: "Action:" and a fenced JSON list whose objects its template
// indents; the arguments compact (the grammar's JSON has no line breaks).
CallWriting CommandRPlus() {
  CallWriting w;
  w.section_open = "Action:";
  w.list_open = "\n```json\n[\n";
  w.call_open = "    {\n        \"tool_name\": \"";
  w.name_end = "\",\n        \"parameters\": ";
  w.call_close = "\n    }";
  w.call_separator = ",\n";
  w.section_close = "\n]```";
  return w;
}

// The syntax's own writing with the template's line breaks in the
// markers: DeepSeek R1's `NAME\n```json\nA\n```` and "\n" between calls.
CallWriting DeepSeekR1() {
  CallWriting w = FromSyntax(*FindToolSyntax(ToolCallFormat::kDeepSeekR1));
  w.name_end = "\n```json\n";
  w.arguments_close = "\n```";
  w.call_separator = "\n";
  return w;
}

}  // namespace

std::optional<CallWriting> FindCallWriting(ToolCallFormat format) {
  using F = ToolCallFormat;
  switch (format) {
    case F::kHarmony:
      return Harmony();
    case F::kQwen3Coder:
    case F::kSeedOss:
    case F::kGlm:
    case F::kHunyuan:
    case F::kMiniMax:
    case F::kDeepSeekDsml:
    case F::kDeepSeekV4:
    case F::kMiniCpm:
    case F::kDeepSeekV31:
    case F::kKimiK2:
    case F::kSolar:
    case F::kFunctionaryV31:
    case F::kFunctionaryV32:
      return FromSyntax(*FindToolSyntax(format));
    case F::kDeepSeekR1:
      return DeepSeekR1();
    case F::kApriel:
      return JsonCallObjects("<tool_calls>", "</tool_calls>", false);
    case F::kNemotronV2:
      return JsonCallObjects("<TOOLCALL>", "</TOOLCALL>", false);
    case F::kGranite:
      return JsonCallObjects("<|tool_call|>", "", false);
    case F::kFirefunction:
      return JsonCallObjects("functools", "", false);
    case F::kGigaChat:
      return JsonCallObjects("<|function_call|>", "", true);
    case F::kCommandR7b:
      return CommandR7b();
    case F::kCommandRPlus:
      return CommandRPlus();
    default:
      return std::nullopt;
  }
}

std::string ForcedCallOpening(const CallWriting& w, absl::string_view name,
                              bool prompt_opened_section) {
  const char* gap = w.newlines ? "\n" : "";
  std::string out =
      absl::StrCat(prompt_opened_section ? "" : w.section_open, w.list_open);
  if (!w.call_open.empty()) absl::StrAppend(&out, gap, w.call_open);
  if (name.empty() || !OpeningHoldsName(w)) return out;
  absl::StrAppend(&out, w.name_prefix, name, w.name_index ? ":0" : "",
                  w.name_end, gap);
  return out;
}

}  // namespace paceline::chat
