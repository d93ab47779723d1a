#ifndef PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_H_
#define PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_H_

// Paceline's output (delivery's Outgoing, the scheduler's FinishInfo) as
// OpenAI's response bodies: pure JSON builders. The caller serializes with
// Dump (openai_json.h), which never throws: invalid UTF-8 in a string
// becomes U+FFFD there; the token strings built here are valid already.
//
// Facts from OpenAI's API reference as the official Node client types it
// (openai/openai-node src/resources/completions.ts `Completion`,
// `CompletionChoice`, `CompletionUsage`; src/resources/chat/completions/
// completions.ts `ChatCompletion`, `ChatCompletionChunk`,
// `ChatCompletionMessage`, `ChatCompletionTokenLogprob`,
// `ChatCompletionStreamOptions`; src/resources/models.ts `Model`):
//  - Bodies: {id, object, created (Unix seconds), model, choices, usage}.
//    object is "text_completion" (completions, streamed or not: "both the
//    streamed and non-streamed response objects share the same shape"),
//    "chat.completion", or "chat.completion.chunk".
//  - Completions choice: {index, text, logprobs: Logprobs | null,
//    finish_reason: "stop" | "length" | "content_filter"}; Logprobs is
//    {tokens[], token_logprobs[], top_logprobs[] ({token: logprob} per
//    position), text_offset[]}. "The API will always return the logprob of
//    the sampled token, so there may be up to logprobs+1 elements".
//  - Chat choice: {index, message, logprobs: {content[], refusal} | null,
//    finish_reason: "stop" | "length" | "tool_calls" | ...}; message is
//    {role: "assistant", content: string | null, refusal: string | null,
//    tool_calls?: [{id, type: "function", function {name, arguments}}]}.
//    ChatCompletionTokenLogprob is {token, logprob, bytes: int[] | null,
//    top_logprobs[] {token, logprob, bytes}}; a logprob below the top 20 is
//    given as -9999.0.
//  - Chunk choice: {index, delta {role?, content?, refusal?, tool_calls?[]
//    {index, id?, type?, function? {name?, arguments?}}}, logprobs?,
//    finish_reason: ... | null}. With stream_options.include_usage "an
//    additional chunk will be streamed before the data: [DONE] message"
//    whose `choices` "will always be an empty array", and "all other chunks
//    will also include a usage field, but with a null value".
//  - Usage: {prompt_tokens, completion_tokens, total_tokens,
//    prompt_tokens_details? {cached_tokens}}.
//  - Model: {id, object: "model", created, owned_by}; the list is a page
//    {object: "list", data: [...]}.
// `reasoning_content` (in message and delta) is the vLLM / llama.cpp /
// DeepSeek extension for reasoning text.
//
// Where OpenAI's reference is silent, peers decide:
//  - A token's `token` string is its bytes (Tokenizer::TokenBytes) with
//    every ill-formed UTF-8 subpart, an incomplete one included, replaced
//    by U+FFFD: a byte-fallback token <0xF0> reads "\uFFFD". That is vLLM's
//    (serving_chat.py / serving_completion.py: tokenizer.decode(id), which
//    replaces). `bytes` is the token's raw bytes, as llama.cpp's server
//    sends them (completion_token_output::to_json: str_to_bytes of the raw
//    piece) and as OpenAI documents the field ("useful in instances where
//    characters are represented by multiple tokens and their byte
//    representations must be combined"); vLLM instead encodes the replaced
//    string, which loses them. A control token (no bytes) reads as its
//    vocabulary text ("<|im_end|>"), as vLLM's decode of one id does, with
//    those bytes.
//  - Logprobs are clamped to >= -9999.0 (vLLM: max(logprob, -9999.0);
//    also keeps -inf out of the JSON, where nlohmann would write null).
//  - Completions text_offset counts Unicode code points (Python string
//    indices, which OpenAI's legacy API and vLLM's cumulative len(token)
//    use), from the start of the choice's text: a token's offset is the
//    number of characters its predecessors' bytes completed (an incomplete
//    character counts once its last byte arrives; invalid bytes count one
//    U+FFFD per subpart, as the detokenizer writes them). Like vLLM's, the
//    offsets follow the tokens, so those after a trimmed stop string may
//    pass the end of `text`.
//  - Chat logprobs list every sampled token of the choice (reasoning and
//    tool-call tokens included), as vLLM does.
//  - finish_reason for a request that did not end by itself: "abort"
//    (cancelled) and "error", vLLM's strings (v1/engine FINISH_REASON_
//    STRINGS). The HTTP layer sends an error instead where it can.
//  - /tokenize and /detokenize: vLLM's TokenizeResponse {count,
//    max_model_len, tokens, token_strs?} and DetokenizeResponse {prompt}
//    (vllm/entrypoints/openai/protocol.py); token_strs are the vocabulary
//    strings (convert_ids_to_tokens).
//
// Thread-compatible: builders are per response; the Tokenizer must outlive
// them (it may be null where the context's logprobs are off: only logprobs
// read it).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "scheduler/request_types.h"
#include "server/delivery/stream_buffer.h"

namespace paceline::server::openai {

using Json = nlohmann::ordered_json;

enum class Api { kCompletion, kChat };

// "cmpl-" (completions) or "chatcmpl-" (chat), then `random` as 16
// lowercase hex digits.
std::string ResponseId(Api api, uint64_t random);

// What every body and chunk of one response shares.
struct ResponseContext {
  std::string id;       // ResponseId
  int64_t created = 0;  // Unix seconds
  std::string model;
  Api api = Api::kCompletion;
  bool logprobs = false;       // the request asked for logprobs
  bool include_usage = false;  // streams: every chunk carries "usage": null
};

// "stop", "length", "tool_calls" (a chat answer holding a complete tool
// call that ended by itself: kStop, by EOS or a stop string; the rule of
// MarkToolCallsFinish in server/grpc/proto_convert.cc), or for the error path
// "abort" (kCancelled) and "error" (kError).
absl::string_view FinishReasonName(const scheduler::FinishInfo& finish,
                                   bool called_tools);

// {prompt_tokens, completion_tokens, total_tokens,
//  prompt_tokens_details {cached_tokens}}.
Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
               int64_t cached_tokens);

// Usage summed over a response's choices. completion_tokens counts what the
// client is charged for: every sampled token, the EOS that ended a choice
// included (FinishInfo::usage, as gRPC's FillFinished reports it). The
// prompt (and its cached part) counts once per prompt: the n choices of one
// prompt share it. With speculative decoding, completion_tokens_details
// says how many draft tokens were accepted and rejected, under the names
// OpenAI uses for predicted outputs (accepted_prediction_tokens,
// rejected_prediction_tokens); absent when no draft ran. Fast-forward's
// forced tokens (part of completion_tokens) are there too as
// forced_tokens, Paceline's name, when a constraint forced any.
class UsageCounter {
 public:
  // `first_choice_of_prompt`: count this choice's prompt tokens.
  void Add(const scheduler::Usage& usage, bool first_choice_of_prompt);
  Json ToJson() const;

  // The sums, for the other APIs' usage shapes.
  int64_t prompt_tokens() const { return prompt_; }
  int64_t completion_tokens() const { return completion_; }
  int64_t cached_tokens() const { return cached_; }
  int64_t forced_tokens() const { return forced_; }

 private:
  int64_t prompt_ = 0;
  int64_t completion_ = 0;
  int64_t cached_ = 0;
  int64_t drafted_ = 0;
  int64_t accepted_ = 0;
  int64_t forced_ = 0;
};

// Turns sampled tokens into either API's logprobs, tracking the
// completions text offsets across calls (one per choice, in order).
class LogprobsBuilder {
 public:
  explicit LogprobsBuilder(const engine::Tokenizer* tokenizer);

  // Completions: appends one position per sample to `out`, an object with
  // the arrays tokens, token_logprobs, top_logprobs, text_offset (created
  // when null). top_logprobs holds the sample's top entries and the sampled
  // token (if not among them); of tokens whose strings coincide, the first
  // (most likely) keeps the key.
  void AppendCompletion(absl::Span<const engine::SampleResult> samples,
                        Json* out);
  // Chat: appends one {token, logprob, bytes, top_logprobs} per sample to
  // `content`, an array (created when null).
  void AppendChat(absl::Span<const engine::SampleResult> samples,
                  Json* content) const;

  // The token's string and bytes (see the top of this file).
  std::string TokenString(int32_t id) const;
  Json TokenBytesJson(int32_t id) const;

 private:
  const std::string& RawBytes(int32_t id) const;

  const engine::Tokenizer* tokenizer_;
  engine::IncrementalDetokenizer offsets_;  // text before the next token
  int64_t offset_ = 0;                      // code points so far
};

// One choice of a non-streamed answer, accumulated from its kDelta
// messages in order.
class ChoiceBuilder {
 public:
  ChoiceBuilder(const ResponseContext* context,
                const engine::Tokenizer* tokenizer);

  // Takes a kDelta (other kinds are ignored): text, reasoning and tool-call
  // deltas merged per call index (a call listed broken is dropped for
  // good), and the samples' logprobs when the context asks for them.
  void Add(const Outgoing& delta);

  // Completions: {index, text, logprobs (null when off), finish_reason}.
  // Chat: {index, message {role "assistant", content (null when empty and
  // there are tool calls), refusal null, reasoning_content (when
  // non-empty), tool_calls (when any complete: [{id, type "function",
  // function {name, arguments}}])}, logprobs ({content, refusal null}, or
  // null when off), finish_reason}.
  Json ToJson(int index, absl::string_view finish_reason) const;

  const std::string& text() const { return text_; }

 private:
  const ResponseContext* context_;
  std::string text_;
  std::string reasoning_;
  std::vector<chat::ChatToolCallDelta> calls_;  // merged, by first sight
  std::vector<int> broken_;                     // call indices
  LogprobsBuilder logprobs_builder_;
  Json logprobs_;  // null until a sample arrives
};

// {id, object ("text_completion" / "chat.completion"), created, model,
//  choices, usage}.
Json ResponseJson(const ResponseContext& context, Json choices, Json usage);

// True when a chunk for `delta` would show the client something: text,
// reasoning, a tool-call piece, or (logprobs on) a sample.
bool HasVisibleOutput(const ResponseContext& context, const Outgoing& delta);

// One choice of a stream: the chunk for each kDelta, in order.
class ChoiceStream {
 public:
  ChoiceStream(const ResponseContext* context,
               const engine::Tokenizer* tokenizer, int index);

  // Completions: a text_completion chunk {index, text, logprobs (this
  // delta's positions, or null), finish_reason null}. Chat: a
  // chat.completion.chunk whose delta holds, on the choice's first chunk,
  // role "assistant" and content (possibly ""), afterwards content when
  // non-empty; then reasoning_content when non-empty, and tool_calls when
  // any: the first piece of a call {index, id, type "function", function
  // {name, arguments}}, later ones {index, function {arguments}}. A call
  // listed broken in the same delta is left out (the stream cannot take
  // back what it sent already). Chunk(Outgoing{}) as the first call gives
  // the role-only chunk OpenAI opens a choice with.
  Json Chunk(const Outgoing& delta);

 private:
  const ResponseContext* context_;
  int index_;
  bool first_ = true;
  LogprobsBuilder logprobs_builder_;
};

// The choice's last chunk: completions {index, text "", logprobs null,
// finish_reason}; chat {index, delta {}, logprobs null, finish_reason}.
Json FinishChunkJson(const ResponseContext& context, int index,
                     absl::string_view finish_reason);

// The include_usage chunk: choices [] and `usage` (UsageJson).
Json UsageChunkJson(const ResponseContext& context, Json usage);

// GET /v1/models: one model, and the list page.
Json ModelJson(absl::string_view id, int64_t created,
               absl::string_view owned_by);
Json ModelListJson(std::vector<Json> models);

// POST /tokenize: {count, max_model_len, tokens}, plus token_strs (the
// vocabulary strings, U+FFFD for invalid UTF-8) when `token_strs_from` is
// given.
Json TokenizeJson(absl::Span<const int32_t> tokens, int64_t max_model_len,
                  const engine::Tokenizer* token_strs_from = nullptr);
// POST /detokenize: {prompt}, invalid UTF-8 replaced by U+FFFD.
Json DetokenizeJson(absl::string_view text);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_H_
