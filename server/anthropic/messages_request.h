#ifndef PACELINE_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_
#define PACELINE_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_

// Anthropic Messages request bodies (POST /v1/messages and
// /v1/messages/count_tokens) -> the shared OpenAiRequest: one
// v1::GenerateRequest with chat input, n = 1. Pure: no tokenizer, no
// tenant; BuildRequest (server/frontend/request_builder.h) still checks the
// result against the model and the tenant.
//
// Facts from Anthropic's API reference (docs.anthropic.com "Messages" and
// "Count Message tokens") as its official TypeScript client types them
// (anthropics/anthropic-sdk-typescript, src/resources/messages/
// messages.ts: `MessageCreateParamsBase`, `MessageCountTokensParams`,
// `MessageParam`, `ContentBlockParam`, `TextBlockParam`,
// `ThinkingBlockParam`, `ToolUseBlockParam`, `ToolResultBlockParam`,
// `Tool`, `ToolChoice*`, `ThinkingConfig*`, `Metadata`):
//  - `max_tokens` (required), `messages` (required), `model`, `system`:
//    string | TextBlockParam[] ({type "text", text}), `stop_sequences`:
//    string[], `stream`, `temperature`, `top_p`, `top_k`, `metadata`
//    {user_id}, `tools`, `tool_choice`, `thinking`.
//  - `messages[]`: {role "user" | "assistant", content: string | blocks}.
//    A string is one text block. "Consecutive user or assistant turns in
//    your request will be combined into a single turn"; "If the final
//    message uses the assistant role, the response content will continue
//    immediately from the content in that message".
//  - Blocks: text {text}; thinking {thinking, signature}; redacted_thinking
//    {data}; tool_use {id, name, input (an object)}; tool_result
//    {tool_use_id, content?: string | TextBlockParam[] (images, documents
//    ...), is_error?}. Other types (image, document, search_result, server
//    tools) are refused here as not supported.
//  - `tools[]`: {name, description?, input_schema (a JSON Schema object,
//    type "object"), strict?, type?: "custom" | null}; server tools (a
//    versioned `type` such as "bash_20250124") are refused.
//  - `tool_choice`: {type "auto" | "any" | "tool" (+ name) | "none",
//    disable_parallel_tool_use?: bool (default false; true: "the model
//    will output exactly one tool use", at most one for auto)}.
//  - `thinking`: {type "enabled", budget_tokens} | {type "disabled"} |
//    {type "adaptive"}.
//
// How they land in Paceline's chat (chat/request_context.h renders it with
// the model's template, as an OpenAI chat is rendered):
//  - `system` -> a first "system" message (text blocks joined with "\n").
//  - user text blocks -> a "user" message (blocks joined with "\n");
//    each tool_result -> a "tool" message {tool_call_id, content}, in block
//    order, so [tool_result, text] is a tool message then a user message.
//    is_error: the content reads "Error: " + content (chat templates have
//    no field for it). Consecutive user (or assistant) turns become one
//    message, their texts joined with "\n", as Anthropic combines them
//    (templates that insist on alternating roles then accept them).
//  - assistant text -> content, thinking blocks -> reasoning_content
//    (joined), tool_use -> tool_calls [{id, function {name, arguments:
//    input as JSON text}}]; redacted_thinking is dropped (its data is
//    opaque to any model but Anthropic's).
//  - A tool-use id "toolu_X" reaches the template as "X" (answers name
//    calls "toolu_" + the parser's id, messages_answer.h; Mistral's
//    templates insist on bare 9-character ids).
//  - tool_choice any -> ToolChoice::kRequired, tool -> kNamed, none ->
//    kNone (the tools dropped), auto -> kAuto; tools with strict or a
//    forced choice are enforced as chat's are (ConstrainToolCalls,
//    server/openai/openai_tool_choice.h), parallel unless
//    disable_parallel_tool_use.
//  - thinking enabled / adaptive -> template variable enable_thinking =
//    true, disabled -> false (templates without it ignore it);
//    budget_tokens is checked (an integer >= 1) but not enforced.
//  - metadata is read and ignored; temperature, top_p, top_k and
//    Paceline's extensions (seed, min_p, penalties, pace_tokens_per_s,
//    priority, ...) as in chat (openai_options.h); ranges are Paceline's,
//    which contain Anthropic's.
//
// Errors: InvalidArgument whose message names the field as a path
// ("messages[1].content[0].type", "tool_choice.name"). Unknown fields are
// ignored; JSON null is the same as absent.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/openai/openai_request.h"

namespace paceline::server::anthropic {

// The prefix of a tool-use id in answers and requests.
inline constexpr absl::string_view kToolUseIdPrefix = "toolu_";

// POST /v1/messages: `max_tokens` required.
absl::StatusOr<openai::OpenAiRequest> ParseMessagesRequest(
    absl::string_view body);

// POST /v1/messages/count_tokens: the same body without `max_tokens` (and
// without `stream`, ignored); the prompt is what counts.
absl::StatusOr<openai::OpenAiRequest> ParseCountTokensRequest(
    absl::string_view body);

}  // namespace paceline::server::anthropic

#endif  // PACELINE_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_
