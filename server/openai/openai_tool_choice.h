#ifndef PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_

// tool_choice "required" and a named function, and strict tools.
//
// The call is begun for the model: the assistant's turn gets the opening of
// a tool call in the model's own format (an "assistant prefill"), so the
// output can only continue that call. Named: the call's name is written
// too, so the model writes only the arguments; required: only the opening
// marker, and the model picks the name.
//
//   hermes        <tool_call>\n{"name": "NAME", "arguments":
//   llama3        {"name": "NAME", "parameters":
//   mistral       [TOOL_CALLS][{"name": "NAME", "arguments":
//   mistral_args  [TOOL_CALLS]NAME[ARGS]
//   the other families with a forced form (Qwen3-Coder XML, GLM, MiniMax,
//   DeepSeek, Kimi K2, gpt-oss, ...): chat/tool_formats/call_writing.h's
//   ForcedCallOpening, e.g. qwen3_coder `<tool_call>\n<function=NAME>\n`
//   named, `<tool_call>\n<function=` required
//
// The prefix is appended to the rendered prompt (its markers as control
// tokens where the vocabulary has them) and fed to the output parser
// first (DeliveryOptions::chat_output_prefix), so the call is announced
// with its name at once.
//
// And the rest is enforced (structured output): the request carries a
// tool-call constraint (paceline.proto ToolCalls, the grammar in
// engine/sampling/grammar/tool_call_grammar.h), so the model writes a
// tool's name, arguments valid under that tool's parameters (a JSON
// object), and the format's closing, then ends; the parsed call always has
// valid JSON arguments. tool_choice "auto" with a strict tool
// (tools[i].function.strict: OpenAI's "arguments always match the
// schema") gets the same constraint lazily: free text until the model
// opens a call, then the call's grammar. A strict tool's schema the server
// cannot enforce is a 400; a non-strict tool's arguments are then any JSON
// object.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/output_parser.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// The prefix for `choice` (kRequired or kNamed with `name`) in `format`;
// "" for kAuto and kNone. `prompt_opened_calls`: the rendered prompt ends
// with the marker that opens the calls (ChatOutputFormat's
// starts_in_tool_calls), which the prefix then leaves out. InvalidArgument
// (param "tool_choice") when the model's template has no tool-call format
// Paceline parses.
absl::StatusOr<std::string> ToolCallPrefix(chat::ToolCallFormat format,
                                           ToolChoice choice,
                                           absl::string_view name,
                                           bool prompt_opened_calls = false);

// Sets request->sampling.constraint.tool_calls (its format left to the
// chat template) for `parsed`'s tool_choice over the chat's tools:
// required and named always (named: that tool alone), auto when a tool is
// strict (`strict[i]`: tools[i].function.strict); `parallel` is
// parallel_tool_calls. Required and named replace a response_format (the
// answer is a call, which has no content for it to shape); auto with
// strict tools and a response_format is InvalidParam "response_format":
// one request holds one constraint.
absl::Status ConstrainToolCalls(const std::vector<bool>& strict, bool parallel,
                                const OpenAiRequest& parsed,
                                v1::GenerateRequest* request);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_
