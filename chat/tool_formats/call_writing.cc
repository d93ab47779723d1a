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
      return FromSyntax(*FindToolSyntax(format));
    default:
      return std::nullopt;
  }
}

std::string ForcedCallOpening(const CallWriting& w, absl::string_view name) {
  const char* gap = w.newlines ? "\n" : "";
  std::string out = w.section_open;
  if (!w.call_open.empty()) absl::StrAppend(&out, gap, w.call_open);
  if (name.empty() || !OpeningHoldsName(w)) return out;
  absl::StrAppend(&out, w.name_prefix, name, w.name_index ? ":0" : "",
                  w.name_end, gap);
  return out;
}

}  // namespace paceline::chat
