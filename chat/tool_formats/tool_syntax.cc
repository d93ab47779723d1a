#include "chat/tool_formats/tool_syntax.h"

#include <vector>

#include "absl/strings/match.h"

namespace paceline::chat {
namespace {

// Qwen3-Coder's parameters, shared by Seed-OSS.
ToolSyntax QwenXml(ToolCallFormat format, absl::string_view open,
                   absl::string_view close) {
  ToolSyntax s;
  s.format = format;
  s.body = CallBody::kXmlParameters;
  s.section_open = open;
  s.section_close = close;
  s.call_open = "<function=";
  s.name_end = ">";
  s.parameter_open = "<parameter=";
  s.parameter_key_end = ">";
  s.parameter_close = "</parameter>";
  s.call_close = "</function>";
  s.newlines = true;
  s.section_per_call = true;
  return s;
}

// GLM's `NAME<arg_key>K</arg_key><arg_value>V</arg_value>`, its markers
// ending in `suffix` (Hunyuan's ":opensource").
ToolSyntax GlmXml(ToolCallFormat format, absl::string_view call_open,
                  absl::string_view name_end, absl::string_view key_open,
                  absl::string_view key_end, absl::string_view value_open,
                  absl::string_view value_close, absl::string_view call_close) {
  ToolSyntax s;
  s.format = format;
  s.body = CallBody::kXmlParameters;
  s.section_open = call_open;
  s.name_end = name_end;
  s.name_end_kept = name_end == "<";
  s.parameter_open = key_open;
  s.parameter_key_end = key_end;
  s.value_open = value_open;
  s.parameter_close = value_close;
  s.call_close = call_close;
  s.newlines = true;
  return s;
}

// `<invoke name="N"><parameter name="P">V</parameter></invoke>` (MiniMax,
// DeepSeek's DSML with its `string="..."` attribute, MiniCPM's <param>).
ToolSyntax Invoke(ToolCallFormat format, absl::string_view section_open,
                  absl::string_view section_close, absl::string_view call_open,
                  absl::string_view parameter_open, bool attrs,
                  absl::string_view parameter_close,
                  absl::string_view call_close) {
  ToolSyntax s;
  s.format = format;
  s.body = CallBody::kXmlParameters;
  s.section_open = section_open;
  s.section_close = section_close;
  s.call_open = call_open;
  s.name_end = "\">";
  s.parameter_open = parameter_open;
  s.parameter_key_end = attrs ? "\"" : "\">";
  s.parameter_attrs_end = attrs ? ">" : "";
  s.parameter_close = parameter_close;
  s.call_close = call_close;
  s.newlines = true;
  return s;
}

// A name, then a JSON arguments object.
ToolSyntax JsonArguments(ToolCallFormat format, absl::string_view section_open,
                         absl::string_view section_close,
                         absl::string_view call_open,
                         absl::string_view name_end,
                         absl::string_view call_close) {
  ToolSyntax s;
  s.format = format;
  s.body = CallBody::kJsonArguments;
  s.section_open = section_open;
  s.section_close = section_close;
  s.call_open = call_open;
  s.name_end = name_end;
  s.call_close = call_close;
  return s;
}

// JSON call objects after a marker (in an array when `array`).
ToolSyntax JsonCalls(ToolCallFormat format, absl::string_view open,
                     absl::string_view close, bool array) {
  ToolSyntax s;
  s.format = format;
  s.body = CallBody::kJsonCall;
  s.section_open = open;
  s.section_close = close;
  s.array = array;
  return s;
}

std::vector<ToolSyntax> MakeTable() {
  using F = ToolCallFormat;
  std::vector<ToolSyntax> t;
  t.push_back(QwenXml(F::kQwen3Coder, "<tool_call>", "</tool_call>"));
  t.push_back(QwenXml(F::kSeedOss, "<seed:tool_call>", "</seed:tool_call>"));
  t.push_back(GlmXml(F::kGlm, "<tool_call>", "<", "<arg_key>", "</arg_key>",
                     "<arg_value>", "</arg_value>", "</tool_call>"));
  ToolSyntax hy = GlmXml(F::kHunyuan, "<tool_calls:opensource>",
                         "<tool_sep:opensource>", "<arg_key:opensource>",
                         "</arg_key:opensource>", "<arg_value:opensource>",
                         "</arg_value:opensource>", "</tool_call:opensource>");
  hy.section_close = "</tool_calls:opensource>";
  hy.call_open = "<tool_call:opensource>";
  t.push_back(hy);
  t.push_back(Invoke(F::kMiniMax, "<minimax:tool_call>", "</minimax:tool_call>",
                     "<invoke name=\"", "<parameter name=\"", false,
                     "</parameter>", "</invoke>"));
  t.push_back(Invoke(F::kDeepSeekDsml, "<｜DSML｜function_calls>",
                     "</｜DSML｜function_calls>", "<｜DSML｜invoke name=\"",
                     "<｜DSML｜parameter name=\"", true, "</｜DSML｜parameter>",
                     "</｜DSML｜invoke>"));
  t.push_back(Invoke(F::kDeepSeekV4, "<｜DSML｜tool_calls>",
                     "</｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"",
                     "<｜DSML｜parameter name=\"", true, "</｜DSML｜parameter>",
                     "</｜DSML｜invoke>"));
  t.push_back(Invoke(F::kMiniCpm, "<function name=\"", "", "", "<param name=\"",
                     false, "</param>", "</function>"));
  t.push_back(JsonArguments(F::kDeepSeekV31, "<｜tool▁calls▁begin｜>",
                            "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                            "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"));
  ToolSyntax r1 = t.back();
  r1.format = F::kDeepSeekR1;
  r1.name_prefix = "function<｜tool▁sep｜>";
  r1.name_end = "```json";
  r1.arguments_close = "```";
  t.push_back(r1);
  ToolSyntax kimi =
      JsonArguments(F::kKimiK2, "<|tool_calls_section_begin|>",
                    "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                    "<|tool_call_argument_begin|>", "<|tool_call_end|>");
  kimi.name_prefix = "functions.";
  kimi.name_has_index = true;
  t.push_back(kimi);
  ToolSyntax solar = JsonArguments(F::kSolar, "<|tool_calls|>", "<|calls|>",
                                   "<|tool_call:begin|>", "<|tool_call:args|>",
                                   "<|tool_call:end|>");
  solar.id_end = "<|tool_call:name|>";
  t.push_back(solar);
  t.push_back(JsonArguments(F::kFunctionaryV31, "<function=", "", "", ">",
                            "</function>"));
  ToolSyntax v32 = JsonArguments(F::kFunctionaryV32, ">>>", "", "", "\n", "");
  v32.content_name = "all";
  t.push_back(v32);
  t.push_back(JsonCalls(F::kGranite, "<|tool_call|>", "", true));
  t.push_back(JsonCalls(F::kNemotronV2, "<TOOLCALL>", "</TOOLCALL>", true));
  t.push_back(JsonCalls(F::kApriel, "<tool_calls>", "</tool_calls>", true));
  t.push_back(JsonCalls(F::kFirefunction, "functools", "", true));
  t.push_back(
      JsonCalls(F::kCommandR7b, "<|START_ACTION|>", "<|END_ACTION|>", true));
  ToolSyntax plus = JsonCalls(F::kCommandRPlus, "Action:", "```", true);
  plus.array_prefix = "```json";
  t.push_back(plus);
  t.push_back(JsonCalls(F::kGigaChat, "<|function_call|>", "", false));
  return t;
}

const std::vector<ToolSyntax>& Table() {
  static const std::vector<ToolSyntax>* table =
      new std::vector<ToolSyntax>(MakeTable());
  return *table;
}

struct Detection {
  ToolCallFormat format;
  absl::string_view marker;
  absl::string_view also;  // a second marker the source must hold, or ""
};

// Most specific first: GLM's and Qwen3-Coder's sources hold `<tool_call>`
// too, Command R7B's "Action:" too.
constexpr Detection kDetections[] = {
    {ToolCallFormat::kHarmony, "<|channel|>", "<|message|>"},
    {ToolCallFormat::kSeedOss, "<seed:tool_call>", ""},
    {ToolCallFormat::kMiniMax, "<minimax:tool_call>", ""},
    {ToolCallFormat::kDeepSeekDsml, "DSML", "function_calls"},
    {ToolCallFormat::kDeepSeekV4, "DSML", ""},
    {ToolCallFormat::kDeepSeekR1, "<｜tool▁sep｜>", "```json"},
    {ToolCallFormat::kDeepSeekV31, "<｜tool▁sep｜>", ""},
    {ToolCallFormat::kKimiK2, "<|tool_calls_section_begin|>", ""},
    {ToolCallFormat::kSolar, "<|tool_call:begin|>", ""},
    {ToolCallFormat::kHunyuan, "<tool_sep{}>", ""},
    {ToolCallFormat::kGlm, "<arg_key>", ""},
    {ToolCallFormat::kMiniCpm, "<function name=", ""},
    {ToolCallFormat::kQwen3Coder, "<function=", "<parameter="},
    {ToolCallFormat::kFunctionaryV31, "<function=", ""},
    {ToolCallFormat::kFunctionaryV32, ">>>", ""},
    {ToolCallFormat::kCommandR7b, "<|START_ACTION|>", ""},
    {ToolCallFormat::kCommandRPlus, "Action:", "```json"},
    {ToolCallFormat::kNemotronV2, "<TOOLCALL>", ""},
    {ToolCallFormat::kApriel, "<tool_calls>", ""},
    {ToolCallFormat::kGranite, "<|tool_call|>", ""},
    {ToolCallFormat::kFirefunction, "functools[", ""},
    {ToolCallFormat::kGigaChat, "<|function_call|>", ""},
};

}  // namespace

const ToolSyntax* FindToolSyntax(ToolCallFormat format) {
  for (const ToolSyntax& s : Table()) {
    if (s.format == format) return &s;
  }
  return nullptr;
}

ToolCallFormat DetectToolSyntax(absl::string_view source) {
  for (const Detection& d : kDetections) {
    if (absl::StrContains(source, d.marker) &&
        (d.also.empty() || absl::StrContains(source, d.also))) {
      return d.format;
    }
  }
  return ToolCallFormat::kNone;
}

}  // namespace paceline::chat
