#ifndef PACELINE_CHAT_TOOL_FORMATS_TOOL_CALL_FORMAT_H_
#define PACELINE_CHAT_TOOL_FORMATS_TOOL_CALL_FORMAT_H_

// How a model writes tool calls, one value per family of chat templates
// (the markers of each: tool_syntax.cc's table, or the class that reads
// it). ChatOutputParser (chat/output_parser.h) reads every one.

#include <optional>

#include "absl/strings/string_view.h"

namespace paceline::chat {

enum class ToolCallFormat {
  kNone,  // no tool calls: everything outside reasoning is content
  // Hermes, Qwen 2.5/3, QwQ, Granite 4, MiMo, Bielik: `<tool_call>\n{"name":
  // ..., "arguments": {...}}\n</tool_call>`, one block per call.
  kHermes,
  // Llama 3.1/3.2/3.3: a JSON object `{"name": ..., "parameters": {...}}`
  // ("arguments" accepted too) as the start of the output, or after
  // `<|python_tag|>` anywhere; further calls after `;`. Llama's builtin
  // python-style calls (`<|python_tag|>brave_search.call(...)`) are not
  // JSON and so come out as content.
  kLlama3,
  // Mistral Nemo and the v3 tokenizers: `[TOOL_CALLS]` and a JSON array of
  // `{"name": ..., "arguments": {...}}` objects.
  kMistral,
  // Mistral Small 3.2, Devstral, Ministral 3: `[TOOL_CALLS]name[ARGS]{...}`
  // (optionally `[CALL_ID]id` before `[ARGS]`; the id is then the call's),
  // one `[TOOL_CALLS]` per call.
  //
  // Both Mistral values parse both Mistral forms; the value says which one
  // the template renders back.
  kMistralArgs,

  // The families below are data (tool_syntax.cc) read by one engine
  // (markup_reader.h), except gpt-oss (harmony_parser.h).
  //
  // XML parameters (`<parameter=P>\nVALUE\n</parameter>` and the like): a
  // value is a string or, when it parses as JSON and is not a bare string
  // (or the tool's schema declares a non-string type), that JSON value.
  //
  // Qwen3-Coder, Qwen3.5, Nemotron 3, StepFun 3.5: `<tool_call>\n<function=
  // NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>`.
  kQwen3Coder,
  // Seed-OSS: the same inside `<seed:tool_call>`; reasoning `<seed:think>`.
  kSeedOss,
  // GLM 4.5-4.7, Laguna: `<tool_call>NAME<arg_key>K</arg_key>
  // <arg_value>V</arg_value></tool_call>`.
  kGlm,
  // MiniMax M2: `<minimax:tool_call><invoke name="N"><parameter name="P">V
  // </parameter></invoke></minimax:tool_call>`.
  kMiniMax,
  // DeepSeek V3.2: `<｜DSML｜function_calls><｜DSML｜invoke name="N">
  // <｜DSML｜parameter name="P" string="true|false">V</｜DSML｜parameter>...`.
  kDeepSeekDsml,
  // DeepSeek V4: the same in `<｜DSML｜tool_calls>`.
  kDeepSeekV4,
  // MiniCPM 5: `<function name="N"><param name="P">V</param></function>`.
  kMiniCpm,
  // DeepSeek V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME
  // <｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`.
  kDeepSeekV31,
  // DeepSeek R1: the same with `function<｜tool▁sep｜>NAME\n```json\n{...}
  // \n```` in each call.
  kDeepSeekR1,
  // Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:
  // IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>...`.
  kKimiK2,
  // Solar Open: `<|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME
  // <|tool_call:args|>{...}<|tool_call:end|>`.
  kSolar,
  // Functionary v3.1: `<function=NAME>{...}</function>`.
  kFunctionaryV31,
  // Functionary v3.2: `>>>NAME\n{...}`; `>>>all\n` opens content.
  kFunctionaryV32,
  // JSON call objects in an array after a marker: Granite 3.3
  // (`<|tool_call|>[...]`), Nemotron Nano v2 (`<TOOLCALL>[...]</TOOLCALL>`),
  // Apriel (`<tool_calls>[...]</tool_calls>`), firefunction
  // (`functools[...]`), Command R7B (`<|START_ACTION|>[{"tool_call_id": ...,
  // "tool_name": ..., "parameters": {...}}]<|END_ACTION|>`, reasoning
  // `<|START_THINKING|>`), Command R+ (`Action: ```json\n[...]````).
  kGranite,
  kNemotronV2,
  kApriel,
  kFirefunction,
  kCommandR7b,
  kCommandRPlus,
  // Hunyuan 3: GLM's form with `:opensource` markers, `<tool_sep:opensource>`
  // after the name, in `<tool_calls:opensource>`.
  kHunyuan,
  // GigaChat 3.1: `<|function_call|>{"name": ..., "arguments": {...}}`.
  kGigaChat,
  // gpt-oss harmony: channels `analysis` (reasoning), `final` (content),
  // `commentary to=functions.NAME` (a call, its message the arguments).
  kHarmony,
};

// "none", "hermes", "llama3", "mistral", "mistral_args", "qwen3_coder",
// "seed_oss", "glm", "minimax", "deepseek_dsml", "deepseek_v4", "minicpm",
// "deepseek_v3_1", "deepseek_r1", "kimi_k2", "solar", "functionary_v3_1",
// "functionary_v3_2", "granite", "nemotron_v2", "apriel", "firefunction",
// "command_r7b", "command_r_plus", "hunyuan", "gigachat", "gpt_oss".
absl::string_view ToolCallFormatName(ToolCallFormat format);
// The inverse; nullopt for an unknown name.
std::optional<ToolCallFormat> ToolCallFormatFromName(absl::string_view name);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_TOOL_FORMATS_TOOL_CALL_FORMAT_H_
