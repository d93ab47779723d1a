#ifndef PACELINE_SERVER_OPENAI_RESPONSES_ANSWER_H_
#define PACELINE_SERVER_OPENAI_RESPONSES_ANSWER_H_

// The Responses API's answers (answer_format.h): a Response object, whole
// or as typed server-sent events. One choice (the API has no n).
//
// Facts from OpenAI's API reference as the official Node client types it
// (openai/openai-node src/resources/responses/responses.ts `Response`,
// `ResponseOutputMessage`, `ResponseOutputText`, `ResponseFunctionToolCall`,
// `ResponseReasoningItem`, `ResponseUsage`, `ResponseStreamEvent` and its
// members; src/lib/responses/ResponseStream.ts, which rebuilds the
// response from the events by output_index and content_index):
//  - Response: {id, object "response", created_at (Unix seconds), status
//    (completed | incomplete | failed | in_progress | ...), error,
//    incomplete_details {reason} | null, instructions, max_output_tokens,
//    model, output[], parallel_tool_calls, previous_response_id, reasoning,
//    store, temperature, text, tool_choice, tools, top_p, truncation,
//    usage, user, metadata}.
//  - Output items: {type "message", id, status, role "assistant", content
//    [{type "output_text", text, annotations []}]}; {type "function_call",
//    id, call_id, name, arguments (JSON text), status}; {type "reasoning",
//    id, summary [], content [{type "reasoning_text", text}], status}.
//  - Usage: {input_tokens, input_tokens_details {cached_tokens},
//    output_tokens, output_tokens_details {reasoning_tokens},
//    total_tokens}.
//  - Events: each is `event: TYPE` and `data: {type: TYPE,
//    sequence_number, ...}`; no `[DONE]` ends the stream. In order:
//    response.created and response.in_progress (the response in progress,
//    output []), then per item response.output_item.added {output_index,
//    item}; for a message response.content_part.added {item_id,
//    output_index, content_index, part}, response.output_text.delta
//    {..., delta, logprobs []}, response.output_text.done {..., text},
//    response.content_part.done; for reasoning the same with
//    response.reasoning_text.delta / .done and a reasoning_text part; for
//    a call response.function_call_arguments.delta {item_id, output_index,
//    delta} and .done {..., name, arguments}; then
//    response.output_item.done {output_index, item}. Last
//    response.completed, or response.incomplete with incomplete_details
//    {reason "max_output_tokens"}, carrying the whole response; a failure
//    is one `error` event {code, message, param}.
//
// Paceline's choices where the reference is silent (vLLM's responses
// serving does the same): ids are "resp_", "msg_", "rs_", "fc_" and 16
// hex digits; a call's call_id is the output parser's call id. An item
// the length limit cut is "incomplete", the others "completed". A tool call
// the parser found malformed (its text then comes back as message text)
// is left out of a whole answer; a stream cannot take it back, so there
// it ends "incomplete". output_tokens_details.reasoning_tokens counts the
// tokens of deltas that held reasoning and nothing else (a delta mixing
// both counts as output only).
//
// Thread-compatible: one instance per call.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/openai/answer_format.h"
#include "server/openai/responses_request.h"

namespace paceline::server::openai {

// `prefix` ("resp_", "msg_", ...) and `random` as 16 lowercase hex digits.
std::string ResponsesId(absl::string_view prefix, uint64_t random);

struct ResponsesContext {
  std::string id;          // ResponsesId("resp_", ...)
  int64_t created_at = 0;  // Unix seconds
  std::string model;
  ResponsesEcho echo;      // the request's fields (ParseResponsesRequest)
  uint64_t item_seed = 0;  // item ids derive from it
};

class ResponsesAnswer final : public AnswerFormat {
 public:
  explicit ResponsesAnswer(ResponsesContext context);

  void RespondError(http::HttpExchange& exchange, const absl::Status& status,
                    std::function<void(bool)> done) const override;
  absl::string_view MaxTokensParam() const override {
    return "max_output_tokens";
  }
  absl::string_view LogprobsParam() const override { return "top_logprobs"; }

  std::string StreamOpened(const scheduler::AcceptInfo& accepted) override;
  std::string StreamAccepted(int index) override;
  std::string StreamDelta(int index, const Outgoing& delta) override;
  std::string StreamFinished(int index, const Outgoing& finished) override;
  std::string StreamEnd(const UsageCounter& usage) override;
  std::string StreamFailed(const absl::Status& status) override;

  void Add(int index, const Outgoing& delta) override;
  void Finished(int index, const Outgoing& finished) override;
  Json Body(const UsageCounter& usage) override;

 private:
  enum class Kind { kReasoning, kMessage, kCall };
  struct Item {
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;     // the message's or reasoning's text; the arguments
    std::string name;     // kCall
    std::string call_id;  // kCall
    std::string status = "in_progress";
    bool broken = false;  // kCall: malformed
  };

  // Takes one delta into the items; with `events`, appends the events it
  // makes.
  void Take(const Outgoing& delta, std::string* events);
  // The open item of `kind` (a new one after closing another).
  Item& Open(Kind kind, std::string* events);
  // Closes the open item (if any) with `status`.
  void Close(absl::string_view status, std::string* events);
  // A call's first delta opens its item; later ones append arguments.
  void TakeCall(const chat::ChatToolCallDelta& call, std::string* events);
  void Finish(const Outgoing& finished, std::string* events);

  // Appends `event: type` / `data: fields + type + sequence_number`.
  void Event(const char* type, Json fields, std::string* events);
  Json ItemJson(const Item& item) const;
  Json UsageJson(const UsageCounter& usage) const;
  // The Response; `output` lists the items (malformed calls only when
  // `with_broken`).
  Json ResponseJson(absl::string_view status, Json usage,
                    bool with_broken) const;
  std::string NextItemId(absl::string_view prefix);

  const ResponsesContext context_;
  std::vector<Item> items_;
  int open_ = -1;                        // index in items_, or -1
  absl::flat_hash_map<int, int> calls_;  // call index -> index in items_
  int64_t sequence_ = 0;                 // the next event's number
  int64_t reasoning_tokens_ = 0;
  uint64_t items_made_ = 0;
  bool incomplete_ = false;  // ended by the length limit
};

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_RESPONSES_ANSWER_H_
