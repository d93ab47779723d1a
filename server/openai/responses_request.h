#ifndef PACELINE_SERVER_OPENAI_RESPONSES_REQUEST_H_
#define PACELINE_SERVER_OPENAI_RESPONSES_REQUEST_H_

// POST /v1/responses bodies (OpenAI's Responses API, stateless) -> the
// shared OpenAiRequest: one prompt whose input is a chat, n = 1.
//
// Facts from OpenAI's API reference as the official Node client types it
// (openai/openai-node src/resources/responses/responses.ts
// `ResponseCreateParamsBase`, `ResponseInputItem`, `EasyInputMessage`,
// `ResponseInputText`, `ResponseOutputMessage`, `ResponseFunctionToolCall`,
// `ResponseInputItem.FunctionCallOutput`, `ResponseReasoningItem`,
// `FunctionTool`, `ToolChoiceOptions`, `ToolChoiceFunction`,
// `ResponseTextConfig`; src/resources/shared.ts `Reasoning`):
//  - `input`: a string (one user message) or a list of items. A message is
//    {type?: "message", role: user | assistant | system | developer,
//    content: string | parts[]}; parts are {type: "input_text", text}
//    (and input_image / input_file / input_audio); an earlier answer's
//    message has {type: "output_text", text} (or {type: "refusal",
//    refusal}) parts. {type: "function_call", call_id, name, arguments
//    (JSON text), id?, status?}; {type: "function_call_output", call_id,
//    output: string | parts[]}; {type: "reasoning", id, summary[]
//    {type: "summary_text", text}, content?[] {type: "reasoning_text",
//    text}, encrypted_content?}; {type: "item_reference", id}.
//  - `instructions`: "a system (or developer) message inserted into the
//    model's context".
//  - `tools[]`: function tools are flat: {type: "function", name,
//    description?, parameters, strict}. `tool_choice`: "none" | "auto" |
//    "required" | {type: "function", name} (and hosted / allowed_tools /
//    custom choices). `parallel_tool_calls` (bool).
//  - `max_output_tokens`, `temperature`, `top_p`, `top_logprobs`,
//    `stream`, `stream_options` {include_obfuscation}, `text` {format:
//    {type: "text"} | {type: "json_object"} | {type: "json_schema", name,
//    schema, strict?, description?}, verbosity?}, `reasoning` {effort:
//    none | minimal | low | medium | high | xhigh, summary?}, `store`,
//    `previous_response_id`, `conversation`, `background`, `prompt`,
//    `include`, `metadata`, `truncation`, `user`, `service_tier`.
//
// How Paceline maps them onto a chat (v1::Chat, then the model's template):
//  - `instructions` becomes a leading system message (vLLM does the same);
//    `input` messages keep their roles, their text parts joined into one
//    string (templates render `content` as a string). A function_call is an
//    assistant tool call {id: call_id, function {name, arguments}}; calls in
//    a row join one assistant message, and join the assistant message (or
//    reasoning) just before them. A function_call_output is a tool message
//    {tool_call_id: call_id, name: the call's name when the input holds the
//    call}. A reasoning item is the `reasoning_content` of the assistant
//    turn it precedes (its content texts, else its summary texts);
//    encrypted_content is not readable here and is ignored.
//  - `reasoning.effort` is the template variable `reasoning_effort` (as
//    vLLM and llama.cpp's server pass it; templates that do not read it
//    ignore it); vLLM's `chat_template_kwargs` may still override it.
//  - Function tools as chat's (openai_tool_choice.h enforces required,
//    named and strict). `strict` absent or null counts as false, as in
//    chat: a schema Paceline cannot enforce is refused only when asked for.
//  - `text.format` through the structured-output engine, as chat's
//    response_format (openai_response_format.h).
//  - Every other option openai_options.h reads is accepted too (Paceline's
//    pacing and priority, vLLM's top_k / min_p / ..., `stop`, `seed`).
//
// Stateless: Paceline keeps no responses. `previous_response_id`,
// `conversation` and an `item_reference` input item are refused (400,
// saying to resend the conversation as `input`); `store: true` (the
// clients' default) is accepted and nothing is stored; `background: true`
// and `prompt` (stored prompt templates) are refused as not supported, as
// are non-function tools, hosted-tool / allowed_tools / custom tool
// choices, image, file and audio parts, and `top_logprobs` above 0.
// `include`, `metadata`, `truncation`, `user`, `service_tier`,
// `safety_identifier`, `prompt_cache_key` are accepted and change nothing
// (metadata is echoed back).
//
// Errors: InvalidArgument, naming the field as OpenAI's `param`
// ("input[2].call_id", "tools[0].name", "text.format.schema").

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// The request's fields a Response object repeats (openai-node `Response`):
// instructions, max_output_tokens, metadata, parallel_tool_calls,
// reasoning {effort, summary}, temperature, text {format}, tool_choice,
// tools, top_p, truncation, user, each as sent or its default; store is
// false (nothing is kept, whatever was asked).
using ResponsesEcho = Json;

// Parses `body`; sets *echo (when given) to the fields above.
absl::StatusOr<OpenAiRequest> ParseResponsesRequest(
    absl::string_view body, ResponsesEcho* echo = nullptr);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_RESPONSES_REQUEST_H_
