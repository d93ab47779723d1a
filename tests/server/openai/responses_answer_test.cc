// Delivery's output -> the Responses API's Response object and its typed
// events (server/openai/responses_answer.h). Expected shapes come from
// OpenAI's API reference (the facts listed in responses_answer.h).
#include "server/openai/responses_answer.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace paceline::server::openai {
namespace {

ResponsesContext Context() {
  ResponsesContext c;
  c.id = ResponsesId("resp_", 0xabc);
  c.created_at = 1700000000;
  c.model = "m";
  c.echo = Json{{"instructions", nullptr}, {"store", false}};
  c.item_seed = 7;
  return c;
}

Outgoing Text(const std::string& text, int tokens = 1) {
  Outgoing d;
  d.text = text;
  d.ids.assign(tokens, 5);
  return d;
}

Outgoing Reasoning(const std::string& text, int tokens) {
  Outgoing d;
  d.reasoning = text;
  d.ids.assign(tokens, 5);
  return d;
}

Outgoing Call(int index, const std::string& id, const std::string& name,
              const std::string& args) {
  Outgoing d;
  d.ids = {5};
  d.tool_calls.push_back({index, id, name, args});
  return d;
}

Outgoing Finish(scheduler::FinishReason reason) {
  Outgoing f;
  f.kind = Outgoing::Kind::kFinished;
  f.was_accepted = true;
  f.finish.reason = reason;
  return f;
}

UsageCounter Usage(int prompt, int completion, int cached) {
  scheduler::Usage u;
  u.prompt_tokens = prompt;
  u.completion_tokens = completion;
  u.cached_prompt_tokens = cached;
  UsageCounter counter;
  counter.Add(u, true);
  return counter;
}

struct Event {
  std::string type;
  Json data;
};

// Splits SSE bytes into events, checking the framing: `event: T`, then
// `data: JSON` whose type is T.
std::vector<Event> Events(const std::string& sse) {
  std::vector<Event> out;
  for (absl::string_view block : absl::StrSplit(sse, "\n\n")) {
    if (block.empty()) continue;
    std::vector<std::string> lines = absl::StrSplit(block, '\n');
    EXPECT_EQ(lines.size(), 2u) << block;
    if (lines.size() != 2) continue;
    EXPECT_EQ(lines[0].rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(lines[1].rfind("data: ", 0), 0u) << block;
    Event e{lines[0].substr(7), Json::parse(lines[1].substr(6))};
    EXPECT_EQ(e.data["type"], e.type);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> Types(const std::vector<Event>& events) {
  std::vector<std::string> types;
  for (const Event& e : events) types.push_back(e.type);
  return types;
}

TEST(ResponsesAnswer, WholeAnswerWithReasoningTextAndCall) {
  ResponsesAnswer a(Context());
  a.Add(0, Reasoning("hm", 2));
  a.Add(0, Reasoning("m", 1));
  a.Add(0, Text("Hello"));
  a.Add(0, Text(" there"));
  a.Add(0, Call(0, "call_1", "get", "{\"q\""));
  a.Add(0, Call(0, "", "", ":1}"));
  a.Finished(0, Finish(scheduler::FinishReason::kStop));
  const Json body = a.Body(Usage(10, 6, 4));
  EXPECT_EQ(body["id"], "resp_0000000000000abc");
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["created_at"], 1700000000);
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["incomplete_details"], nullptr);
  EXPECT_EQ(body["error"], nullptr);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["store"], false);  // from the echo
  ASSERT_EQ(body["output"].size(), 3u);
  const Json& rs = body["output"][0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_EQ(rs["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(rs["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(rs["content"][0]["text"], "hmm");
  EXPECT_EQ(rs["summary"], Json::array());
  const Json& msg = body["output"][1];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], "Hello there");
  EXPECT_EQ(msg["content"][0]["annotations"], Json::array());
  const Json& fc = body["output"][2];
  EXPECT_EQ(fc["type"], "function_call");
  EXPECT_EQ(fc["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(fc["call_id"], "call_1");
  EXPECT_EQ(fc["name"], "get");
  EXPECT_EQ(fc["arguments"], "{\"q\":1}");
  EXPECT_EQ(fc["status"], "completed");
  // Item ids differ.
  EXPECT_NE(rs["id"], msg["id"]);
  EXPECT_NE(msg["id"].get<std::string>().substr(4),
            fc["id"].get<std::string>().substr(3));
  const Json& usage = body["usage"];
  EXPECT_EQ(usage["input_tokens"], 10);
  EXPECT_EQ(usage["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(usage["output_tokens"], 6);
  EXPECT_EQ(usage["output_tokens_details"]["reasoning_tokens"], 3);
  EXPECT_EQ(usage["total_tokens"], 16);
}

TEST(ResponsesAnswer, LengthMakesItIncomplete) {
  ResponsesAnswer a(Context());
  EXPECT_EQ(a.MaxTokensParam(), "max_output_tokens");
  a.Add(0, Text("cut"));
  a.Finished(0, Finish(scheduler::FinishReason::kLength));
  const Json body = a.Body(Usage(1, 1, 0));
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(body["output"][0]["status"], "incomplete");
}

TEST(ResponsesAnswer, MalformedCallIsLeftOutOfAWholeAnswer) {
  ResponsesAnswer a(Context());
  a.Add(0, Call(0, "call_1", "get", "{"));
  Outgoing broken = Text("<tool_call>{ oops");
  broken.broken_tool_calls = {0};
  a.Add(0, broken);
  a.Finished(0, Finish(scheduler::FinishReason::kStop));
  const Json body = a.Body(Usage(1, 2, 0));
  ASSERT_EQ(body["output"].size(), 1u);
  EXPECT_EQ(body["output"][0]["type"], "message");
}

TEST(ResponsesAnswer, StreamEventsInOrder) {
  ResponsesAnswer a(Context());
  std::string sse = a.StreamOpened({});
  sse += a.StreamAccepted(0);
  sse += a.StreamDelta(0, Reasoning("r", 1));
  sse += a.StreamDelta(0, Text("Hi"));
  sse += a.StreamDelta(0, Text("!"));
  sse += a.StreamDelta(0, Call(0, "call_1", "get", "{\"a\""));
  sse += a.StreamDelta(0, Call(0, "", "", ":2}"));
  sse += a.StreamFinished(0, Finish(scheduler::FinishReason::kStop));
  sse += a.StreamEnd(Usage(3, 5, 0));
  EXPECT_EQ(sse.find("[DONE]"), std::string::npos);
  const std::vector<Event> events = Events(sse);
  const std::vector<std::string> want = {
      "response.created",
      "response.in_progress",
      "response.output_item.added",  // reasoning
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",  // message
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",  // call
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
  };
  ASSERT_EQ(Types(events), want);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["sequence_number"], static_cast<int>(i));
  }
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], Json::array());
  EXPECT_EQ(events[0].data["response"]["usage"], nullptr);
  // The message: index 1, its deltas and its text.
  const Json& added = events[8].data;
  EXPECT_EQ(added["output_index"], 1);
  EXPECT_EQ(added["item"]["status"], "in_progress");
  EXPECT_EQ(added["item"]["content"], Json::array());
  const std::string msg_id = added["item"]["id"];
  EXPECT_EQ(events[9].data["part"]["type"], "output_text");
  EXPECT_EQ(events[10].data["item_id"], msg_id);
  EXPECT_EQ(events[10].data["output_index"], 1);
  EXPECT_EQ(events[10].data["content_index"], 0);
  EXPECT_EQ(events[10].data["delta"], "Hi");
  EXPECT_EQ(events[12].data["text"], "Hi!");
  EXPECT_EQ(events[13].data["part"]["text"], "Hi!");
  EXPECT_EQ(events[14].data["item"]["status"], "completed");
  EXPECT_EQ(events[14].data["item"]["content"][0]["text"], "Hi!");
  // The call: announced with its name and call_id, arguments streamed.
  const Json& call = events[15].data["item"];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get");
  EXPECT_EQ(call["call_id"], "call_1");
  EXPECT_EQ(call["arguments"], "");
  EXPECT_EQ(events[16].data["delta"], "{\"a\"");
  EXPECT_EQ(events[18].data["arguments"], "{\"a\":2}");
  EXPECT_EQ(events[18].data["name"], "get");
  EXPECT_EQ(events[19].data["item"]["arguments"], "{\"a\":2}");
  // The last event carries the whole response.
  const Json& done = events.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hi!");
  EXPECT_EQ(done["usage"]["output_tokens"], 5);
  EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
}

TEST(ResponsesAnswer, StreamEndsIncompleteOnLength) {
  ResponsesAnswer a(Context());
  std::string sse = a.StreamOpened({});
  sse += a.StreamDelta(0, Text("a"));
  sse += a.StreamFinished(0, Finish(scheduler::FinishReason::kLength));
  sse += a.StreamEnd(Usage(1, 1, 0));
  const std::vector<Event> events = Events(sse);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "response.incomplete");
  EXPECT_EQ(events.back().data["response"]["incomplete_details"]["reason"],
            "max_output_tokens");
  EXPECT_EQ(events[events.size() - 2].data["item"]["status"], "incomplete");
}

TEST(ResponsesAnswer, StreamFailureIsAnErrorEvent) {
  ResponsesAnswer a(Context());
  std::string sse = a.StreamOpened({});
  sse += a.StreamFailed(absl::ResourceExhaustedError("too slow"));
  const std::vector<Event> events = Events(sse);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].type, "error");
  EXPECT_EQ(events[2].data["message"], "too slow");
  EXPECT_EQ(events[2].data["code"], "rate_limit_exceeded");
  EXPECT_EQ(events[2].data["param"], nullptr);
  EXPECT_EQ(events[2].data["sequence_number"], 2);
}

TEST(ResponsesAnswer, StreamedMalformedCallEndsIncomplete) {
  ResponsesAnswer a(Context());
  std::string sse = a.StreamOpened({});
  sse += a.StreamDelta(0, Call(0, "call_1", "get", "{"));
  Outgoing broken = Text("<tool_call>{ oops");
  broken.broken_tool_calls = {0};
  sse += a.StreamDelta(0, broken);
  sse += a.StreamFinished(0, Finish(scheduler::FinishReason::kStop));
  sse += a.StreamEnd(Usage(1, 2, 0));
  const std::vector<Event> events = Events(sse);
  bool saw_incomplete_call = false;
  for (const Event& e : events) {
    EXPECT_NE(e.type, "response.function_call_arguments.done");
    if (e.type == "response.output_item.done" &&
        e.data["item"]["type"] == "function_call") {
      EXPECT_EQ(e.data["item"]["status"], "incomplete");
      saw_incomplete_call = true;
    }
  }
  EXPECT_TRUE(saw_incomplete_call);
}

}  // namespace
}  // namespace paceline::server::openai
