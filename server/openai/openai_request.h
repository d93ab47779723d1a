#ifndef PACELINE_SERVER_OPENAI_OPENAI_REQUEST_H_
#define PACELINE_SERVER_OPENAI_OPENAI_REQUEST_H_

// OpenAI request bodies -> Paceline's v1::GenerateRequest, plus the
// OpenAI-only options the HTTP transport needs (stream, n, ...). Pure: no
// tokenizer, no tenant; BuildRequest (server/frontend/request_builder.h) still
// checks the result against the model and the tenant.
//
// Facts from OpenAI's API reference as the official Node client types it
// (openai/openai-node src/resources/completions.ts
// `CompletionCreateParamsBase`, src/resources/chat/completions/
// completions.ts `ChatCompletionCreateParamsBase`, message and tool param
// types):
//  - completions `prompt`: string | string[] | number[] | number[][].
//  - chat `messages[]`: {role, content: string | parts[] | null, name,
//    tool_call_id (role tool), tool_calls[] {id, type "function",
//    function {name, arguments: JSON text}}}; text parts are
//    {type "text", text}. `reasoning_content` is the vLLM / llama.cpp
//    extension for an assistant turn's reasoning.
//  - `tool_choice`: "none" | "auto" | "required" | {type "function",
//    function {name}} (also "allowed_tools" and custom tools, refused here
//    as not supported). "none" is the default without tools, "auto" with.
//    A tool's `function.strict` (bool) asks that its arguments always
//    match its parameters; `parallel_tool_calls` (bool, default true)
//    allows more than one call (openai_tool_choice.h: both enforced).
//  - `max_tokens` is deprecated in chat in favour of
//    `max_completion_tokens`; when both are sent the latter wins (vLLM's
//    rule too). Completions has `max_tokens` only.
//  - `stop`: string | string[], "up to 4 sequences".
//  - completions `logprobs`: an integer top-n (OpenAI's maximum 5; the
//    chosen token's logprob always comes); chat `logprobs`: bool, plus
//    `top_logprobs` 0..20, which needs `logprobs: true`.
//  - `temperature` 0..2, `top_p`, `presence_penalty` / `frequency_penalty`
//    -2..2, `seed` an integer, `n` >= 1, `stream`, `stream_options`
//    {include_usage} ("only set this when you set stream: true"; OpenAI
//    answers 400 otherwise), `echo`, `best_of`, `suffix`, `logit_bias`,
//    `response_format` {type: text | json_object | json_schema}, `user`.
// Not in OpenAI's schema, accepted as vLLM accepts them: `top_k` (-1 or 0
// = off), `min_p`, `repetition_penalty`, `ignore_eos`, `stop_token_ids`,
// `add_generation_prompt`, `chat_template_kwargs`.
// Paceline's own (clients send them with `extra_body`): `pace_tokens_per_s`
// (>= 0), `burst_tokens` (>= 1), `priority` ("interactive", "standard",
// "batch").
//
// Ranges checked here are Paceline's (SamplingOptions in paceline.proto),
// which contain OpenAI's, so any request OpenAI accepts is accepted:
// temperature >= 0, top_p in (0, 1], min_p in [0, 1], penalties in [-2, 2],
// repetition_penalty > 0, `logit_bias` {"<token id>": -100..100} (ids
// checked against the vocabulary when the request is built). Refused as
// not supported (400): `echo: true`, `best_of` other than n, a non-empty
// `suffix`,
// `response_format` other than {"type": "text"}, non-text content parts,
// non-function tools, allowed_tools tool_choice.
//
// Errors: InvalidArgument; a field's error names it as OpenAI's `param`
// (InvalidParam, openai_error.h): "temperature", "messages[2].content",
// "stop[1]", "tools[0].function.name". Unknown fields are ignored; JSON
// null is the same as absent.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/bounded_json.h"
#include "paceline/v1/paceline.pb.h"

namespace paceline::server::openai {

// Bounds on the work one body may ask for. n: each choice is a sequence
// holding KV blocks (forked copy-on-write, but each grows its own) and a
// scheduler slot, so one request may not take a whole server; 16 covers
// every n the OpenAI cookbook uses. Prompts: a batch is submitted as that
// many requests at once.
inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxBatchPrompts = 64;
inline constexpr int kMaxStopSequences = 4;  // OpenAI's "up to 4"
// Arrays and objects nest at most kMaxBodyDepth deep in a body (the body
// itself is level 1), an object holds at most kMaxObjectKeys keys, a whole
// body at most kMaxBodyValues values (arrays, objects, scalars): 400 past
// any, refused while the body is read (bounded_json.h).
inline constexpr int kMaxBodyDepth = chat::kDefaultMaxJsonDepth;
inline constexpr int64_t kMaxObjectKeys = chat::kDefaultMaxJsonObjectKeys;
inline constexpr int64_t kMaxBodyValues = chat::kDefaultMaxJsonValues;

enum class ToolChoice {
  kAuto,      // the default (with or without tools)
  kNone,      // the request's tools are dropped: the template sees none
  kRequired,  // the model must call a tool
  kNamed,     // it must call `tool_choice_name`
};

struct OpenAiRequest {
  // One request per prompt, each complete (input, sampling, stopping,
  // logprobs, priority, delivery, model). Completions with a batch prompt
  // (a list of strings or of token lists) has several, in prompt order;
  // everything else has exactly one.
  std::vector<v1::GenerateRequest> prompts;
  std::string model;  // as sent; "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;                   // choices per prompt, 1..kMaxChoices
  // Logprobs as asked for (also set in each prompt's `logprobs`).
  bool logprobs = false;
  int top_logprobs = 0;
  // Chat only.
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kNamed: one of the request's tools
};

// POST /v1/completions.
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(absl::string_view body);

// POST /v1/chat/completions. The one prompt's input is `chat`.
absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(
    absl::string_view body);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_REQUEST_H_
