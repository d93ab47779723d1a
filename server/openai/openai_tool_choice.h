#ifndef PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_

// tool_choice "required" and a named function, without structured output:
// the assistant's turn is begun for the model with the opening of a tool
// call in the model's own format (an "assistant prefill"), so the output
// can only continue that call. Named: the call's name is written too, so
// the model writes only the arguments; required: only the opening marker,
// and the model picks the name.
//
//   hermes        <tool_call>\n{"name": "NAME", "arguments":
//   llama3        {"name": "NAME", "parameters":
//   mistral       [TOOL_CALLS][{"name": "NAME", "arguments":
//   mistral_args  [TOOL_CALLS]NAME[ARGS]
//
// The prefix is appended to the rendered prompt (its markers as control
// tokens where the vocabulary has them) and fed to the output parser
// first (DeliveryOptions::chat_output_prefix), so the call is announced
// with its name at once. Nothing constrains the arguments: a model that
// writes no valid JSON object there ends with a broken call (its text comes
// back as content), as chat_output.h describes. Stronger guarantees need
// grammar-constrained decoding (structured output), which Paceline does not
// have yet.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/output_parser.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// The prefix for `choice` (kRequired or kNamed with `name`) in `format`;
// "" for kAuto and kNone. InvalidArgument (param "tool_choice") when the
// model's template has no tool-call format Paceline parses.
absl::StatusOr<std::string> ToolCallPrefix(chat::ToolCallFormat format,
                                           ToolChoice choice,
                                           absl::string_view name);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_TOOL_CHOICE_H_
