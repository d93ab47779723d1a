#ifndef PACELINE_SERVER_ANTHROPIC_MESSAGES_ANSWER_H_
#define PACELINE_SERVER_ANTHROPIC_MESSAGES_ANSWER_H_

// Anthropic's Messages answer (answer_format.h): delivery's output (text,
// reasoning, tool-call deltas of one choice) as a Message, or as the
// Messages API's server-sent events.
//
// Facts from Anthropic's API reference ("Messages", "Streaming Messages")
// as its TypeScript client types and reads them (anthropics/
// anthropic-sdk-typescript: src/resources/messages/messages.ts `Message`,
// `ContentBlock`, `TextBlock`, `ThinkingBlock`, `ToolUseBlock`, `Usage`,
// `MessageDeltaUsage`, `StopReason`, `RawMessageStreamEvent` and its
// members, `TextDelta`, `InputJSONDelta`, `ThinkingDelta`;
// src/lib/MessageStream.ts accumulates the events into the final Message;
// src/core/streaming.ts skips `ping` and throws on `error`):
//  - Message: {id, type "message", role "assistant", model, content:
//    blocks, stop_reason, stop_sequence, usage}. Blocks: {type "text",
//    text, citations null}, {type "thinking", thinking, signature},
//    {type "tool_use", id, name, input (an object)}.
//  - stop_reason: "end_turn" (a natural end), "max_tokens", "stop_sequence"
//    ("one of your provided custom stop_sequences was generated"; then
//    stop_sequence names it, else it is null), "tool_use" ("the model
//    invoked one or more tools").
//  - Usage: {input_tokens, output_tokens, cache_creation_input_tokens,
//    cache_read_input_tokens}; "Total input tokens in a request is the
//    summation of input_tokens, cache_creation_input_tokens, and
//    cache_read_input_tokens".
//  - Events, each `event: NAME\ndata: JSON\n\n` with the JSON's `type` =
//    NAME: message_start {message: the Message with content [] and
//    stop_reason null}; per block content_block_start {index,
//    content_block: the block empty (text "", thinking "", tool_use input
//    {})}, content_block_delta {index, delta: {type "text_delta", text} |
//    {type "thinking_delta", thinking} | {type "input_json_delta",
//    partial_json}}, content_block_stop {index}; then message_delta {delta
//    {stop_reason, stop_sequence}, usage {output_tokens, ...: cumulative,
//    the client overwrites its copy}}; message_stop. `ping` may come
//    anywhere; `error` {type "error", error {type, message}} ends a failed
//    stream. Block indexes count from 0 in order (the client appends at
//    content_block_start and addresses by index).
//
// Paceline's choices:
//  - Blocks follow the output: reasoning, text and each tool call open a
//    block when they begin, a new kind (or another call) closes the open
//    one; so text after a call is a new text block. The whole answer's
//    content is exactly the blocks the stream would assemble, less tool
//    calls the parser found broken (chat/output_parser.h: a stream cannot
//    take back what it sent; the whole answer leaves them out, and their
//    text follows as content) and empty blocks.
//  - Thinking blocks carry signature "" (Paceline does not sign reasoning;
//    a thinking block sent back is read without it, messages_request.h).
//  - A tool_use id is "toolu_" + the output parser's id without its
//    "call_" prefix ("toolu_" + 9 letters and digits).
//  - stop_reason "tool_use" when the output held a complete call and ended
//    by itself (as chat's "tool_calls"); "stop_sequence" only for a match
//    of the request's own stop_sequences (a template's stop strings end
//    the turn: "end_turn").
//  - Usage: input_tokens = the prompt less its cached part,
//    cache_read_input_tokens = the cached part (prefix cache hits),
//    cache_creation_input_tokens = 0; output_tokens counts every sampled
//    token (UsageCounter). message_start has the admission's figures,
//    message_delta the final ones.
//  - One `ping` follows message_start.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/openai/answer_format.h"

namespace paceline::server::anthropic {

using openai::Json;

// "msg_" + `random` as 16 lowercase hex digits.
std::string MessageId(uint64_t random);

// "toolu_" + `parser_id` less a leading "call_".
std::string ToolUseId(absl::string_view parser_id);

// The blocks of one answer, as delivery's deltas build them.
class ContentBlocks {
 public:
  enum class Kind { kText, kThinking, kToolUse };
  struct Block {
    Kind kind = Kind::kText;
    std::string text;     // text, thinking, or a call's argument text
    int call = -1;        // kToolUse: the parser's call index
    std::string id;       // kToolUse: "toolu_..."
    std::string name;     // kToolUse
    bool broken = false;  // kToolUse: the parser gave the call up
  };
  // What one delta did, in order, for the events.
  struct Step {
    enum class Op { kStart, kDelta, kStop };
    Op op = Op::kDelta;
    int block = 0;
    std::string piece;  // kDelta: what was appended
  };

  // Adds a kDelta's pieces: reasoning, then text, then each call's.
  std::vector<Step> Add(const Outgoing& delta);
  // Closes the open block, if any.
  std::vector<Step> Close();

  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  // The open block when it is `kind` (and `call`), else a new one, after
  // closing the open one.
  int Use(Kind kind, int call, std::vector<Step>* steps);

  std::vector<Block> blocks_;
  int open_ = -1;  // index into blocks_, -1: none
};

// One block as the Message's content holds it (the whole text or input)
// or, `empty`, as content_block_start announces it.
Json BlockJson(const ContentBlocks::Block& block, bool empty);

class MessagesAnswer final : public openai::AnswerFormat {
 public:
  // `id` from MessageId; `model` as answers name it; `stop_sequences` the
  // request's (to tell its matches from other stop strings).
  MessagesAnswer(std::string id, std::string model,
                 std::vector<std::string> stop_sequences);

  void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                    std::function<void(bool)> done) const override;

  std::string StreamOpened(const scheduler::AcceptInfo& accepted) override;
  std::string StreamAccepted(int index) override;
  std::string StreamDelta(int index, const Outgoing& delta) override;
  std::string StreamFinished(int index, const Outgoing& finished) override;
  std::string StreamEnd(const openai::UsageCounter& usage) override;
  std::string StreamFailed(const absl::Status& status) override;

  void Add(int index, const Outgoing& delta) override;
  void Finished(int index, const Outgoing& finished) override;
  Json Body(const openai::UsageCounter& usage) override;

 private:
  // The stop fields of `finished`: reason, and the stop sequence or null.
  void SetStop(const Outgoing& finished);
  std::string Events(const std::vector<ContentBlocks::Step>& steps) const;
  // {id, type "message", role, model, content, stop_reason, stop_sequence,
  // usage}.
  Json MessageJson(Json content, Json stop_reason, Json stop_sequence,
                   Json usage) const;

  const std::string id_;
  const std::string model_;
  const std::vector<std::string> stop_sequences_;
  ContentBlocks blocks_;
  std::string stop_reason_ = "end_turn";
  Json stop_sequence_;  // null unless stop_reason_ is "stop_sequence"
};

}  // namespace paceline::server::anthropic

#endif  // PACELINE_SERVER_ANTHROPIC_MESSAGES_ANSWER_H_
